package nftables

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/sim"
)

// node1's addresses: its node-network address, the pod bridge gateway, and IPv6.
var node1Addrs = []netip.Addr{ip("172.26.236.177"), ip("192.168.1.1"), ip("fd00:26:236::177"), ip("fd00:192:168:1::1")}

func egress(dst netip.Addr) netip.Addr {
	switch {
	case cidr("192.168.1.0/24").Contains(dst):
		return ip("192.168.1.1")
	case dst.Is6() && cidr("fd00:192:168:1::/64").Contains(dst):
		return ip("fd00:192:168:1::1")
	case dst.Is6():
		return ip("fd00:26:236::177")
	}
	return ip("172.26.236.177")
}

func simulator(t *testing.T) *sim.Simulator {
	t.Helper()
	return sim.New(func() time.Time { return time.Unix(1000, 0) }, Render(featureTable())...)
}

// outcome is one possible fate of a packet, written compactly:
// "forward 192.168.1.5:40000>192.168.2.10:80 1/3" or "rejected tcp reset" or "dropped".
func outcomeString(o sim.Outcome) string {
	r := o.Result
	switch r.Verdict {
	case sim.Rejected:
		return "rejected " + r.Reject.String()
	case sim.Dropped:
		return "dropped"
	}
	return fmt.Sprintf("%s %s>%s %s", r.Delivery, r.Final.Src, r.Final.Dst, o.Probability.RatString())
}

func TestSimulatedFeatureRows(t *testing.T) {
	ap := netip.MustParseAddrPort
	pod := ap("192.168.1.5:40000")
	client := ap("172.26.236.10:40000")
	masq := func(dst string, p string) string { return fmt.Sprintf("forwarded 172.26.236.177:40000>%s %s", dst, p) }
	for _, tc := range []struct {
		name  string
		path  sim.Path
		proto uint8
		src   netip.AddrPort
		dst   string
		want  []string
	}{
		{"ClusterIP from a pod: any endpoint, source kept", sim.PathPrerouting, nft.ProtoTCP, pod, "10.96.0.20:80", []string{
			"forwarded 192.168.1.5:40000>192.168.1.10:80 1/3", "forwarded 192.168.1.5:40000>192.168.2.10:80 1/3", "forwarded 192.168.1.5:40000>192.168.3.10:80 1/3"}},
		{"ClusterIP from outside the cluster: masqueraded", sim.PathPrerouting, nft.ProtoTCP, client, "10.96.0.20:80", []string{
			"forwarded 192.168.1.1:40000>192.168.1.10:80 1/3", masq("192.168.2.10:80", "1/3"), masq("192.168.3.10:80", "1/3")}},
		{"unknown port of a ClusterIP: rejected", sim.PathPrerouting, nft.ProtoTCP, pod, "10.96.0.20:81", []string{"rejected tcp reset"}},
		{"no endpoints: TCP reset", sim.PathPrerouting, nft.ProtoTCP, pod, "10.96.0.24:80", []string{"rejected tcp reset"}},
		{"NodePort from a client: masqueraded", sim.PathPrerouting, nft.ProtoTCP, client, "172.26.236.177:30080", []string{
			"forwarded 192.168.1.1:40000>192.168.1.10:80 1/2", masq("192.168.2.10:80", "1/2")}},
		{"NodePort on 127.0.0.1: not a Service", sim.PathOutput, nft.ProtoTCP, ap("127.0.0.1:40000"), "127.0.0.1:30080", []string{
			"local 127.0.0.1:40000>127.0.0.1:30080 1"}},
		{"NodePort on another node's address: not ours", sim.PathPrerouting, nft.ProtoTCP, client, "172.26.236.178:30080", []string{
			"forwarded 172.26.236.10:40000>172.26.236.178:30080 1"}},
		{"LB IP from inside the source ranges", sim.PathPrerouting, nft.ProtoTCP, client, "172.26.236.180:80", []string{
			"forwarded 192.168.1.1:40000>192.168.1.10:80 1/2", masq("192.168.2.10:80", "1/2")}},
		{"LB IP from outside the source ranges: dropped", sim.PathPrerouting, nft.ProtoTCP, ap("10.1.1.1:40000"), "172.26.236.180:80", []string{"dropped"}},
		{"externalIP, UDP", sim.PathPrerouting, nft.ProtoUDP, client, "172.26.236.190:53", []string{masq("192.168.2.11:5353", "1")}},
		{"ETP Local from outside: local endpoint, client IP kept", sim.PathPrerouting, nft.ProtoTCP, client, "172.26.236.181:80", []string{
			"forwarded 172.26.236.10:40000>192.168.1.10:80 1"}},
		{"ETP Local from a pod: short-circuit to every endpoint", sim.PathPrerouting, nft.ProtoTCP, pod, "172.26.236.181:80", []string{
			"forwarded 192.168.1.5:40000>192.168.1.10:80 1/2", "forwarded 192.168.1.5:40000>192.168.2.10:80 1/2"}},
		{"ETP Local from the node itself: short-circuit, masqueraded", sim.PathOutput, nft.ProtoTCP, ap("172.26.236.177:40000"), "172.26.236.181:80", []string{
			"out 192.168.1.1:40000>192.168.1.10:80 1/2", "out 172.26.236.177:40000>192.168.2.10:80 1/2"}},
		{"ETP Local NodePort without local endpoint: dropped", sim.PathPrerouting, nft.ProtoTCP, client, "172.26.236.177:30083", []string{"dropped"}},
		{"ITP Local: local endpoints only", sim.PathPrerouting, nft.ProtoTCP, pod, "10.96.0.28:80", []string{
			"forwarded 192.168.1.5:40000>192.168.1.10:80 1"}},
		{"ITP Local without local endpoint: dropped", sim.PathPrerouting, nft.ProtoTCP, pod, "10.96.0.29:80", []string{"dropped"}},
		{"hairpin: endpoint to its own Service is masqueraded", sim.PathPrerouting, nft.ProtoTCP, ap("192.168.1.10:40000"), "10.96.0.28:80", []string{
			"forwarded 192.168.1.1:40000>192.168.1.10:80 1"}},
		{"SCTP", sim.PathPrerouting, nft.ProtoSCTP, pod, "10.96.0.25:9999", []string{"forwarded 192.168.1.5:40000>192.168.2.12:9999 1"}},
		{"host to ClusterIP", sim.PathOutput, nft.ProtoTCP, ap("172.26.236.177:40000"), "10.96.0.28:80", []string{
			"out 192.168.1.1:40000>192.168.1.10:80 1"}},
		{"IPv6 ClusterIP from a pod", sim.PathPrerouting, nft.ProtoTCP, ap("[fd00:192:168:1::5]:40000"), "[fd00:96::10]:80", []string{
			"forwarded [fd00:192:168:1::5]:40000>[fd00:192:168:1::10]:80 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := simulator(t)
			dst := ap(tc.dst)
			fam := ipfamily.IPv4
			if dst.Addr().Is6() {
				fam = ipfamily.IPv6
			}
			outs, err := s.Enumerate(sim.Context{LocalAddrs: node1Addrs, Path: tc.path, EgressAddr: egress},
				sim.Packet{Family: fam, Proto: tc.proto, Src: tc.src, Dst: dst})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range outs {
				got = append(got, outcomeString(o))
			}
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("outcomes:\n got  %s\n want %s\n trace of the first:\n%s", strings.Join(got, "\n      "), strings.Join(want, "\n      "), traceText(outs))
			}
		})
	}
}

func traceText(outs []sim.Outcome) string {
	if len(outs) == 0 {
		return ""
	}
	var b strings.Builder
	for _, st := range outs[0].Result.Trace {
		fmt.Fprintf(&b, "   %+v\n", st)
	}
	return b.String()
}

func TestSimulatedAffinitySticks(t *testing.T) {
	s := simulator(t)
	ctx := sim.Context{LocalAddrs: node1Addrs, Path: sim.PathPrerouting, EgressAddr: egress}
	var first netip.AddrPort
	for i := range 10 {
		// Each connection draws a different random number; affinity wins.
		ctx.Rand = func(mod uint32) uint32 { return uint32(i) % mod }
		r, err := s.Run(ctx, sim.Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP,
			Src: netip.AddrPortFrom(ip("192.168.1.5"), uint16(40000+i)), Dst: netip.MustParseAddrPort("10.96.0.30:80")})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r.Final.Dst
		} else if r.Final.Dst != first {
			t.Fatalf("connection %d went to %s, first to %s", i, r.Final.Dst, first)
		}
	}
}

func TestSimulatedProbabilitiesSumToOne(t *testing.T) {
	s := simulator(t)
	outs, err := s.Enumerate(sim.Context{LocalAddrs: node1Addrs, Path: sim.PathPrerouting, EgressAddr: egress},
		sim.Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: netip.MustParseAddrPort("192.168.1.5:1"), Dst: netip.MustParseAddrPort("10.96.0.20:80")})
	if err != nil {
		t.Fatal(err)
	}
	sum := new(big.Rat)
	for _, o := range outs {
		sum.Add(sum, o.Probability)
	}
	if sum.Cmp(big.NewRat(1, 1)) != 0 {
		t.Fatalf("probabilities sum to %s", sum.RatString())
	}
}

// A forwarded packet of an established (or related) connection leaves each
// filter chain by its first rule, one ct lookup; an invalid one still meets
// the drop, and a new one every check.
func TestSimulatedSettledPacketsOneRule(t *testing.T) {
	ap := netip.MustParseAddrPort
	s := simulator(t)
	ctx := sim.Context{LocalAddrs: node1Addrs, Path: sim.PathPrerouting, EgressAddr: egress}
	rulesIn := func(res sim.Result, chain string) (n int, last sim.Step) {
		for _, st := range res.Trace {
			if st.Chain == chain && st.Rule >= 0 {
				n++
				last = st
			}
		}
		return n, last
	}
	for _, c := range []struct {
		state  nft.CtState
		rules  int
		action sim.Action
	}{
		{nft.CtEstablished, 1, sim.ActAccept},
		{nft.CtRelated, 1, sim.ActAccept},
		{nft.CtInvalid, 2, sim.ActDrop},
		{nft.CtNew, 4, sim.ActNoMatch}, // both checks run (and jump back): no verdict
	} {
		res, err := s.Run(ctx, sim.Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: ap("192.168.1.5:40000"), Dst: ap("192.168.2.10:8080"), CtState: c.state})
		if err != nil {
			t.Fatal(err)
		}
		n, last := rulesIn(res, "filter-forward")
		if n != c.rules || (c.state != nft.CtNew && last.Action != c.action) {
			t.Errorf("%s packet: %d rules of filter-forward evaluated, the last %q (action %v); want %d\n%s",
				ctName(c.state), n, last.Text, last.Action, c.rules, traceText([]sim.Outcome{{Result: res}}))
		}
	}
}

func ctName(s nft.CtState) string {
	return map[nft.CtState]string{nft.CtEstablished: "established", nft.CtRelated: "related", nft.CtInvalid: "invalid", nft.CtNew: "new"}[s]
}
