package iptables

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// A small interpreter of the rendered rules: it walks a new connection's
// first packet through nat PREROUTING (or OUTPUT for the node's own traffic),
// the filter hooks, and nat POSTROUTING when it leaves the node, as the
// kernel does, following every branch of
// the statistic cascades with its probability. It knows exactly the matches
// and targets the renderer writes (and fails on any other), so it checks the
// text, not a model of it.

// simPacket is a new connection's first packet.
type simPacket struct {
	src, dst netip.AddrPort
	proto    string
	// output is set for the node's own traffic (nat OUTPUT, filter OUTPUT).
	output bool
}

// simOutcome is one fate of the packet: "dnat ADDR:PORT" or "pass", with
// "masq" when KUBE-POSTROUTING masquerades it (it carries the mark) or
// "egress-masq" when the egress masquerade chain does, or "drop"/"reject".
type simOutcome struct {
	fate string
	p    *big.Rat
}

type simulator struct {
	t      *testing.T
	nat    map[string]*Chain
	filter map[string]*Chain
	local  []netip.Addr
	mark   uint32
}

func newSimulator(t *testing.T, rs *Ruleset) *simulator {
	s := &simulator{t: t, nat: rs.Chains(TableNAT), filter: rs.Chains(TableFilter), mark: rs.cfg.Mark,
		local: ips("172.26.236.177", "192.168.1.1", "fd00:26:236::177", "fd00:192:168:1::1")}
	for _, j := range Jumps {
		m := s.nat
		if j.Table == TableFilter {
			m = s.filter
		}
		if m[j.From] == nil {
			m[j.From] = &Chain{Name: j.From}
		}
		// Prepended in order, as the backend ensures them.
		m[j.From].Rules = slices.Insert(m[j.From].Rules, 0, j.Rule)
	}
	return s
}

// words splits a rule into words, a double-quoted string being one.
func words(r string) []string {
	var out []string
	for r = strings.TrimSpace(r); r != ""; r = strings.TrimSpace(r) {
		if r[0] == '"' {
			end := strings.Index(r[1:], `"`) + 1
			out = append(out, r[1:end])
			r = r[end+1:]
			continue
		}
		w, rest, _ := strings.Cut(r, " ")
		out = append(out, w)
		r = rest
	}
	return out
}

// state is one branch of the walk.
type state struct {
	dst    netip.AddrPort
	marked bool
	// masqBy is the chain whose MASQUERADE took the packet.
	masqBy string
	p      *big.Rat
	// verdict: "" (continue), "dnat", "drop", "reject", "accept".
	verdict string
}

func (s *simulator) isLocal(a netip.Addr) bool { return slices.Contains(s.local, a) }

// run walks chain in table m for packet pk from state st and returns every
// resulting state; a state with a verdict ends the walk of its branch.
func (s *simulator) run(m map[string]*Chain, chain string, pk simPacket, st state, depth int) []state {
	if depth > 10 {
		s.t.Fatalf("jump depth over 10 at %s", chain)
	}
	c := m[chain]
	if c == nil {
		s.t.Fatalf("no chain %s", chain)
	}
	live := []state{st}
	var done []state
	for _, r := range c.Rules {
		var next []state
		for _, cur := range live {
			for _, o := range s.rule(m, chain, r, pk, cur, depth) {
				switch o.verdict {
				case "":
					next = append(next, o)
				case "return":
					o.verdict = ""
					done = append(done, o)
				default:
					done = append(done, o)
				}
			}
		}
		live = next
	}
	return append(done, live...)
}

// rule evaluates one rule: the states that leave it.
func (s *simulator) rule(m map[string]*Chain, chain, r string, pk simPacket, st state, depth int) []state {
	w := words(r)
	prob := (*big.Rat)(nil)
	neg := false
	for i := 0; i < len(w); i++ {
		arg := func() string { i++; return w[i] }
		ok := true
		switch w[i] {
		case "!":
			neg = true
			continue
		case "-m":
			switch arg() {
			case "comment", "tcp", "udp", "sctp", "addrtype", "statistic", "conntrack", "mark":
			case "recent":
				// A first connection: no client is in an affinity list yet.
				for i+1 < len(w) && w[i+1] != "-j" && w[i+1] != "-m" {
					if arg() == "--rcheck" {
						return []state{st}
					}
				}
			default:
				s.t.Fatalf("unknown match in %q", r)
			}
		case "--comment", "--mode":
			arg()
		case "-p":
			ok = arg() == pk.proto
		case "-d":
			ok = prefixOf(arg()).Contains(st.dst.Addr())
		case "-s":
			ok = prefixOf(arg()).Contains(pk.src.Addr())
		case "--dport":
			ok = arg() == strconv.Itoa(int(st.dst.Port()))
		case "--src-type":
			arg()
			ok = s.isLocal(pk.src.Addr())
		case "--ctstate":
			ok = slices.Contains(strings.Split(arg(), ","), "NEW")
		case "--mark":
			v, _ := strconv.ParseUint(strings.TrimPrefix(strings.Split(arg(), "/")[0], "0x"), 16, 32)
			ok = st.marked == (uint32(v) == s.mark)
		case "--probability":
			p, err := strconv.ParseFloat(arg(), 64)
			if err != nil {
				s.t.Fatal(err)
			}
			prob = new(big.Rat).SetFloat64(p)
		case "-j":
			return s.target(m, chain, w[i+1:], pk, st, prob, depth)
		default:
			s.t.Fatalf("unknown word %q in %q", w[i], r)
		}
		if ok == neg {
			return []state{st}
		}
		neg = false
	}
	return []state{st} // a comment-only rule
}

func prefixOf(s string) netip.Prefix {
	if strings.Contains(s, "/") {
		return netip.MustParsePrefix(s)
	}
	a := netip.MustParseAddr(s)
	return netip.PrefixFrom(a, a.BitLen())
}

// target applies a rule's target in chain to st; with prob, the rule
// matches only on that share and the rest goes on unchanged.
func (s *simulator) target(m map[string]*Chain, chain string, w []string, pk simPacket, st state, prob *big.Rat, depth int) []state {
	var miss []state
	if prob != nil {
		rest := new(big.Rat).Sub(big.NewRat(1, 1), prob)
		miss = []state{{dst: st.dst, marked: st.marked, p: new(big.Rat).Mul(st.p, rest)}}
		st.p = new(big.Rat).Mul(st.p, prob)
	}
	switch w[0] {
	case "DNAT":
		st.dst = netip.MustParseAddrPort(w[2])
		st.verdict = "dnat"
	case "MARK":
		// --set-xmark V/M: mark = (mark &^ M) ^ V, on the masquerade bit.
		vm := strings.Split(w[2], "/")
		if w[1] != "--set-xmark" || len(vm) != 2 {
			s.t.Fatalf("unknown MARK target %q", w)
		}
		v, _ := strconv.ParseUint(strings.TrimPrefix(vm[0], "0x"), 16, 32)
		mk, _ := strconv.ParseUint(strings.TrimPrefix(vm[1], "0x"), 16, 32)
		if uint32(mk)&s.mark != 0 {
			st.marked = false
		}
		if uint32(v)&s.mark != 0 {
			st.marked = !st.marked
		}
	case "RETURN":
		st.verdict = "return"
	case "ACCEPT":
		st.verdict = "accept"
	case "DROP":
		st.verdict = "drop"
	case "REJECT":
		st.verdict = "reject"
	case "MASQUERADE":
		st.verdict, st.masqBy = "accept", chain
	default:
		var out []state
		for _, o := range s.run(m, w[0], pk, st, depth+1) {
			if o.verdict == "return" {
				o.verdict = ""
			}
			out = append(out, o)
		}
		return append(out, miss...)
	}
	return append([]state{st}, miss...)
}

// walk returns the packet's fates: nat, then the filter hooks it meets
// (filter has no policy here, so a packet no rule stops passes).
func (s *simulator) walk(pk simPacket) []simOutcome {
	natHook, first := "PREROUTING", state{dst: pk.dst, p: big.NewRat(1, 1)}
	if pk.output {
		natHook = "OUTPUT"
	}
	var outs []simOutcome
	for _, st := range s.run(s.nat, natHook, pk, first, 0) {
		fate := "pass"
		if st.verdict == "dnat" {
			fate = "dnat " + st.dst.String()
		}
		st.verdict = ""
		hooks := []string{"FORWARD"}
		switch {
		case pk.output:
			hooks = []string{"OUTPUT"}
		case s.isLocal(st.dst.Addr()):
			hooks = []string{"INPUT"}
		}
		for _, h := range hooks {
			for _, f := range s.run(s.filter, h, pk, st, 0) {
				switch f.verdict {
				case "drop", "reject":
					fate = f.verdict
				}
			}
		}
		if fate != "drop" && fate != "reject" && !slices.Contains(hooks, "INPUT") {
			st.verdict = ""
			for _, post := range s.run(s.nat, "POSTROUTING", pk, st, 0) {
				switch post.masqBy {
				case ChainPostrouting:
					fate += " masq"
				case ChainEgressMasq:
					fate += " egress-masq"
				case "":
				default:
					s.t.Fatalf("masqueraded by %s", post.masqBy)
				}
			}
		}
		outs = append(outs, simOutcome{fate: fate, p: st.p})
	}
	return outs
}

// fates renders the outcomes sorted, same fates merged: "dnat 1.2.3.4:80 masq 1/2".
func fates(outs []simOutcome) []string {
	sum := map[string]*big.Rat{}
	for _, o := range outs {
		if sum[o.fate] == nil {
			sum[o.fate] = new(big.Rat)
		}
		sum[o.fate].Add(sum[o.fate], o.p)
	}
	var out []string
	for f, p := range sum {
		// Ten-decimal probabilities: round to the nearest small fraction.
		f64, _ := p.Float64()
		out = append(out, f+" "+nearest(f64))
	}
	slices.Sort(out)
	return out
}

func nearest(f float64) string {
	for d := int64(1); d <= 12; d++ {
		n := int64(f*float64(d) + 0.5)
		if diff := f - float64(n)/float64(d); diff < 1e-8 && diff > -1e-8 {
			return big.NewRat(n, d).RatString()
		}
	}
	return fmt.Sprint(f)
}

// featureRow is one packet of a feature row and its fates: which
// endpoints, with what chance, masqueraded or not, or dropped or rejected.
type featureRow struct {
	name   string
	src    netip.AddrPort
	dst    string
	proto  string
	output bool
	want   []string
}

var (
	ap                             = netip.MustParseAddrPort
	pod, client, nodeSrc, outsider = ap("192.168.1.5:40000"), ap("172.26.236.10:40000"), ap("172.26.236.177:40000"), ap("10.1.1.1:40000")
)

// featureRows are the packets walked through the rendered feature table
// (featureTable of testNode).
var featureRows = []featureRow{
	{"ClusterIP from a pod: every endpoint, source kept", pod, "10.96.0.20:80", "tcp", false,
		[]string{"dnat 192.168.1.10:8080 1/3", "dnat 192.168.2.10:8080 1/3", "dnat 192.168.3.10:8080 1/3"}},
	{"ClusterIP from outside the cluster: masqueraded", client, "10.96.0.20:80", "tcp", false,
		[]string{"dnat 192.168.1.10:8080 masq 1/3", "dnat 192.168.2.10:8080 masq 1/3", "dnat 192.168.3.10:8080 masq 1/3"}},
	{"ClusterIP from the node: masqueraded", nodeSrc, "10.96.0.20:80", "tcp", true,
		[]string{"dnat 192.168.1.10:8080 masq 1/3", "dnat 192.168.2.10:8080 masq 1/3", "dnat 192.168.3.10:8080 masq 1/3"}},
	{"NodePort from a client: masqueraded", client, "172.26.236.177:30080", "tcp", false,
		[]string{"dnat 192.168.1.10:8080 masq 1/2", "dnat 192.168.2.10:8080 masq 1/2"}},
	{"NodePort on another address: not a Service", client, "172.26.236.178:30080", "tcp", false, []string{"pass 1"}},
	{"LB IP: masqueraded", client, "172.26.236.180:80", "tcp", false,
		[]string{"dnat 192.168.1.10:8080 masq 1/2", "dnat 192.168.2.10:8080 masq 1/2"}},
	{"LB IP from inside the source ranges", client, "172.26.236.181:80", "tcp", false, []string{"dnat 192.168.2.10:8080 masq 1"}},
	{"LB IP from outside the source ranges: dropped", outsider, "172.26.236.181:80", "tcp", false, []string{"drop 1"}},
	{"LB IP in the ranges from the node itself", nodeSrc, "172.26.236.181:80", "tcp", true, []string{"dnat 192.168.2.10:8080 masq 1"}},
	{"NodePort ignores source ranges", outsider, "172.26.236.177:30082", "tcp", false, []string{"dnat 192.168.2.10:8080 masq 1"}},
	{"external IP, UDP", client, "172.26.236.190:53", "udp", false, []string{"dnat 192.168.2.10:5353 masq 1"}},
	{"SCTP", pod, "10.96.0.25:9999", "sctp", false, []string{"dnat 192.168.2.10:9999 1"}},
	{"no endpoints: ClusterIP rejected", pod, "10.96.0.26:80", "tcp", false, []string{"reject 1"}},
	{"no endpoints: LB IP rejected", client, "172.26.236.182:80", "tcp", false, []string{"reject 1"}},
	{"no endpoints: external IP rejected", client, "172.26.236.191:80", "tcp", false, []string{"reject 1"}},
	{"no endpoints: NodePort rejected", client, "172.26.236.177:30083", "tcp", false, []string{"reject 1"}},
	{"ETP Local from outside: local endpoint, client kept", client, "172.26.236.183:80", "tcp", false, []string{"dnat 192.168.1.10:8080 1"}},
	{"ETP Local NodePort from outside", client, "172.26.236.177:30084", "tcp", false, []string{"dnat 192.168.1.10:8080 1"}},
	{"ETP Local from a pod: short-circuit to every endpoint", pod, "172.26.236.183:80", "tcp", false,
		[]string{"dnat 192.168.1.10:8080 1/2", "dnat 192.168.2.10:8080 1/2"}},
	{"ETP Local from the node: short-circuit, masqueraded", nodeSrc, "172.26.236.183:80", "tcp", true,
		[]string{"dnat 192.168.1.10:8080 masq 1/2", "dnat 192.168.2.10:8080 masq 1/2"}},
	{"ETP Local without local endpoint: LB dropped", client, "172.26.236.184:80", "tcp", false, []string{"drop 1"}},
	{"ETP Local without local endpoint: NodePort dropped", client, "172.26.236.177:30085", "tcp", false, []string{"drop 1"}},
	{"ETP Local without local endpoint: external IP dropped", client, "172.26.236.192:80", "tcp", false, []string{"drop 1"}},
	{"ETP Local without local endpoint: pods still short-circuit", pod, "172.26.236.184:80", "tcp", false, []string{"dnat 192.168.2.10:8080 1"}},
	{"ITP Local: local endpoint only", pod, "10.96.0.29:80", "tcp", false, []string{"dnat 192.168.1.10:8080 1"}},
	{"ITP Local without local endpoint: dropped", pod, "10.96.0.30:80", "tcp", false, []string{"drop 1"}},
	{"ITP Local, NodePort: every endpoint", client, "172.26.236.177:30086", "tcp", false, []string{"dnat 192.168.2.10:8080 masq 1"}},
	{"ITP Local, ClusterIP without local endpoint: dropped", pod, "10.96.0.31:80", "tcp", false, []string{"drop 1"}},
	{"hairpin: an endpoint to its own Service is masqueraded", ap("192.168.1.10:40000"), "10.96.0.29:80", "tcp", false,
		[]string{"dnat 192.168.1.10:8080 masq 1"}},
	{"affinity, first connection: every endpoint", pod, "10.96.0.32:80", "tcp", false,
		[]string{"dnat 192.168.1.10:8080 1/2", "dnat 192.168.2.10:8080 1/2"}},
	{"terminating endpoints when none is ready", pod, "10.96.0.33:80", "tcp", false,
		[]string{"dnat 192.168.2.11:8080 1/2", "dnat 192.168.3.11:8080 1/2"}},
	{"IPv6 ClusterIP from a pod", ap("[fd00:192:168:1::5]:40000"), "[fd00:96::34]:80", "tcp", false,
		[]string{"dnat [fd00:192:168:1::10]:8080 1/2", "dnat [fd00:192:168:2::10]:8080 1/2"}},
	{"IPv6 NodePort from a client", ap("[fd00:26:236::10]:40000"), "[fd00:26:236::177]:30087", "tcp", false,
		[]string{"dnat [fd00:192:168:1::10]:8080 masq 1/2", "dnat [fd00:192:168:2::10]:8080 masq 1/2"}},
}

// TestSimulatedFeatureRows walks packets of each feature row through the
// rendered feature table and checks where they go: which endpoints, with
// what chance, masqueraded or not, or dropped or rejected.
func TestSimulatedFeatureRows(t *testing.T) {
	for _, tc := range featureRows {
		t.Run(tc.name, func(t *testing.T) {
			dst := ap(tc.dst)
			s := newSimulator(t, Render(featureTable(t, testNode()), ipfamily.Of(dst.Addr())))
			got := fates(s.walk(simPacket{src: tc.src, dst: dst, proto: tc.proto, output: tc.output}))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("fates\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(tc.want, "\n      "))
			}
		})
	}
}
