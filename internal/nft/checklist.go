package nft

import (
	"net/netip"
	"reflect"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Example is one entry of the expression checklist: one form of one
// expression kind of the vocabulary, as a rule that uses it, with what the
// kernel needs to load it. Examples lists every entry; a test requires every
// Expr type (and every value of Field, VerdictKind, MarkOp and CtState) to
// appear in it, and pushes every entry through rendering, the netlink
// compiler and decompiler, the kernel and the simulator. Probe commits them
// to find a kernel that lacks a feature before the first sync does.
type Example struct {
	// Name says what the entry shows, in nft's words: "numgen random mod".
	Name string
	// Kernel is the kernel feature the entry needs: the module implementing
	// its expression ("nft_numgen"), with "_ipv4" or "_ipv6" appended for
	// the table's family when PerFamily is set ("nft_fib_ipv4").
	Kernel    string
	PerFamily bool
	// Hook is the base chain the rule sits behind: the kernel checks at
	// commit that the expression may run there (dnat in a nat chain of
	// prerouting or output, masquerade in postrouting, reject in input,
	// forward or output).
	Hook Hook
	// Sets names the example sets (exampleSets) the rule uses.
	Sets []string
	// Rule returns the rule for a table of family f. It matches the packet
	// of ExampleFlowOf(f) and ends with the expression the entry shows.
	Rule func(f ipfamily.Family) *Rule
}

// Feature returns the kernel feature the example needs in a table of family f.
func (e Example) Feature(f ipfamily.Family) string {
	if !e.PerFamily {
		return e.Kernel
	}
	if f == ipfamily.IPv6 {
		return e.Kernel + "_ipv6"
	}
	return e.Kernel + "_ipv4"
}

// ExampleFlow is the packet every example rule matches: a new TCP
// connection's first packet from Src to Dst, carrying Mark, that arrived on
// interface Iif. Its addresses are local to the node, except behind a
// postrouting hook, where the packet is forwarded (masquerade sees only
// those).
type ExampleFlow struct {
	Src, Dst netip.AddrPort
	Proto    uint8
	Mark     uint32
	Iif      string
}

// ExampleFlowOf returns the example packet of family f.
func ExampleFlowOf(f ipfamily.Family) ExampleFlow {
	return ExampleFlow{
		Src:   netip.MustParseAddrPort(pickFamily(f, "10.0.0.1:1234", "[fd00::1]:1234")),
		Dst:   netip.MustParseAddrPort(pickFamily(f, "10.96.0.1:80", "[fd00:96::1]:80")),
		Proto: ProtoTCP,
		Mark:  0x4000,
		Iif:   "veth0",
	}
}

func pickFamily(f ipfamily.Family, v4, v6 string) string {
	if f == ipfamily.IPv6 {
		return v6
	}
	return v4
}

// The base chains examples sit behind.
var (
	hookFilterPrerouting = Hook{Type: "filter", Hook: "prerouting", Priority: -150}
	hookFilterInput      = Hook{Type: "filter", Hook: "input", Priority: 0}
	hookNatPrerouting    = Hook{Type: "nat", Hook: "prerouting", Priority: -100}
	hookNatPostrouting   = Hook{Type: "nat", Hook: "postrouting", Priority: 100}
)

// ExampleTarget is the regular chain the examples' jumps, gotos and verdict
// map elements lead to. It is empty: a packet returns from it.
const ExampleTarget = "target"

// Names of the example sets.
const (
	exSetClusterIPs = "cluster-ips"
	exSetBlocked    = "blocked"
	exMapServiceIPs = "service-ips"
	exMapNodePorts  = "nodeports"
	exSetAffinity   = "affinity"
)

var (
	exKeyService = []Field{FieldDaddr, FieldL4Proto, FieldDport}
	exKeyPort    = []Field{FieldL4Proto, FieldDport}
)

// exampleSets returns the sets the examples use, for a table of family f,
// with the elements that make the example packet hit (or, for the negated
// lookup, miss) them.
func exampleSets(f ipfamily.Family) map[string]*Set {
	p := ExampleFlowOf(f)
	svc := []Value{A(p.Dst.Addr()), N(uint32(p.Proto)), N(uint32(p.Dst.Port()))}
	el := func(key []Value, v *Verdict) map[string]Element {
		return map[string]Element{"": {Key: key, Verdict: v}}
	}
	sets := map[string]*Set{
		exSetClusterIPs: {Name: exSetClusterIPs, Key: exKeyService, Comment: "ClusterIPs",
			Elements: el(svc, nil)},
		exSetBlocked: {Name: exSetBlocked, Key: []Field{FieldSaddr},
			Elements: el([]Value{A(netip.MustParseAddr(pickFamily(f, "198.51.100.1", "2001:db8::1")))}, nil)},
		exMapServiceIPs: {Name: exMapServiceIPs, Key: exKeyService, Verdict: true,
			Elements: el(svc, &Verdict{Kind: Goto, Chain: ExampleTarget})},
		exMapNodePorts: {Name: exMapNodePorts, Key: exKeyPort, Verdict: true,
			Elements: el([]Value{N(uint32(p.Proto)), N(uint32(p.Dst.Port()))}, &Verdict{Kind: Jump, Chain: ExampleTarget})},
		exSetAffinity: {Name: exSetAffinity, Key: []Field{FieldSaddr}, Timeout: 3 * time.Hour, Elements: map[string]Element{}},
	}
	for _, s := range sets {
		for k, e := range s.Elements {
			delete(s.Elements, k)
			s.Elements[KeyString(f, s.Key, e.Key)] = e
		}
	}
	return sets
}

// Examples returns the checklist: every form of every expression kind svcnet
// emits, in a fixed order.
func Examples() []Example {
	flow := ExampleFlowOf
	rule := func(fn func(p ExampleFlow) []Expr) func(ipfamily.Family) *Rule {
		return func(f ipfamily.Family) *Rule { return R(fn(flow(f))...) }
	}
	prefix := func(a netip.Addr, bits int) netip.Prefix { return netip.PrefixFrom(a, bits).Masked() }
	tcp := ProtoMatch{Proto: ProtoTCP}
	verdict := func(v Verdict) func(ipfamily.Family) *Rule {
		return func(ipfamily.Family) *Rule { return R(v) }
	}
	return []Example{
		{Name: "address match", Kernel: "nft_payload", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{Daddr(Host(p.Dst.Addr()))} })},
		{Name: "negated prefix match on a byte boundary", Kernel: "nft_payload", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr {
				return []Expr{AddrMatch{Field: FieldSaddr, Neq: true, Prefix: prefix(p.Dst.Addr(), p.Dst.Addr().BitLen()-16)}}
			})},
		{Name: "masked prefix match", Kernel: "nft_bitwise", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{Daddr(prefix(p.Dst.Addr(), p.Dst.Addr().BitLen()-20))} })},
		{Name: "meta l4proto", Kernel: "nft_meta", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{ProtoMatch{Proto: p.Proto}} })},
		{Name: "th dport", Kernel: "nft_payload", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{PortMatch{Field: FieldDport, Port: p.Dst.Port()}} })},
		{Name: "th sport", Kernel: "nft_payload", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{PortMatch{Field: FieldSport, Port: p.Src.Port()}} })},
		{Name: "ct state", Kernel: "nft_ct", Hook: hookFilterPrerouting,
			Rule: rule(func(ExampleFlow) []Expr {
				return []Expr{CtStateMatch{States: CtNew | CtRelated}, CtStateMatch{States: CtEstablished | CtInvalid | CtNew}}
			})},
		{Name: "fib daddr type local", Kernel: "nft_fib", PerFamily: true, Hook: hookFilterPrerouting,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{FibLocal{}} })},
		{Name: "fib saddr type local", Kernel: "nft_fib", PerFamily: true, Hook: hookFilterPrerouting,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{FibLocal{Saddr: true}} })},
		{Name: "iifname", Kernel: "nft_meta", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{IifnameMatch{Name: p.Iif}} })},
		{Name: "iifname prefix", Kernel: "nft_meta", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{IifnameMatch{Name: p.Iif[:len(p.Iif)-1], Prefix: true}} })},
		{Name: "negated iifname", Kernel: "nft_meta", Hook: hookFilterPrerouting,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{IifnameMatch{Name: "cbr0", Neq: true}} })},
		{Name: "meta mark match", Kernel: "nft_bitwise", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{MarkMatch{Mask: p.Mark, Value: p.Mark}} })},
		{Name: "negated meta mark match", Kernel: "nft_bitwise", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{MarkMatch{Mask: p.Mark << 1, Value: p.Mark << 1, Neq: true}} })},
		{Name: "numgen random mod", Kernel: "nft_numgen", Hook: hookFilterPrerouting,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{Random{Mod: 2, Value: 0}} })},
		{Name: "set lookup of a concatenated key", Kernel: "nft_lookup", Hook: hookFilterPrerouting, Sets: []string{exSetClusterIPs},
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{Lookup{Fields: exKeyService, Set: exSetClusterIPs}} })},
		{Name: "negated set lookup", Kernel: "nft_lookup", Hook: hookFilterPrerouting, Sets: []string{exSetBlocked},
			Rule: rule(func(ExampleFlow) []Expr {
				return []Expr{Lookup{Fields: []Field{FieldSaddr}, Set: exSetBlocked, Neq: true}}
			})},
		{Name: "verdict map of a concatenated key", Kernel: "nft_lookup", Hook: hookFilterPrerouting, Sets: []string{exMapServiceIPs},
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{VMap{Fields: exKeyService, Map: exMapServiceIPs}} })},
		{Name: "verdict map of protocol and port", Kernel: "nft_lookup", Hook: hookFilterPrerouting, Sets: []string{exMapNodePorts},
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{VMap{Fields: exKeyPort, Map: exMapNodePorts}} })},
		{Name: "accept", Kernel: "nft_immediate", Hook: hookFilterPrerouting, Rule: verdict(Verdict{Kind: Accept})},
		{Name: "drop", Kernel: "nft_immediate", Hook: hookFilterPrerouting, Rule: verdict(Verdict{Kind: Drop})},
		{Name: "return", Kernel: "nft_immediate", Hook: hookFilterPrerouting, Rule: verdict(Verdict{Kind: Return})},
		{Name: "jump", Kernel: "nft_immediate", Hook: hookFilterPrerouting, Rule: verdict(JumpTo(ExampleTarget))},
		{Name: "goto", Kernel: "nft_immediate", Hook: hookFilterPrerouting, Rule: verdict(GotoTo(ExampleTarget))},
		{Name: "meta mark set meta mark | value", Kernel: "nft_meta", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{SetMark{Op: MarkOr, Value: p.Mark}} })},
		{Name: "meta mark set meta mark ^ value", Kernel: "nft_meta", Hook: hookFilterPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr { return []Expr{SetMark{Op: MarkXor, Value: p.Mark}} })},
		{Name: "meta nftrace set 1", Kernel: "nft_meta", Hook: hookFilterPrerouting,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{SetNftrace{}} })},
		{Name: "update of a dynamic set", Kernel: "nft_dynset", Hook: hookFilterPrerouting, Sets: []string{exSetAffinity},
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{Update{Set: exSetAffinity, Fields: []Field{FieldSaddr}}} })},
		{Name: "counter", Kernel: "nft_counter", Hook: hookFilterPrerouting,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{Counter{}} })},
		{Name: "dnat to address and port", Kernel: "nft_nat", Hook: hookNatPrerouting,
			Rule: rule(func(p ExampleFlow) []Expr {
				return []Expr{tcp, DNAT{To: netip.AddrPortFrom(p.Dst.Addr().Next(), 8080)}}
			})},
		{Name: "redirect to a port", Kernel: "nft_redir", Hook: hookNatPrerouting,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{tcp, Redirect{Port: 8080}} })},
		{Name: "masquerade", Kernel: "nft_masq", Hook: hookNatPostrouting,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{Masquerade{}} })},
		{Name: "masquerade fully-random", Kernel: "nft_masq", Hook: hookNatPostrouting,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{Masquerade{FullyRandom: true}} })},
		{Name: "reject with icmp port-unreachable", Kernel: "nft_reject", PerFamily: true, Hook: hookFilterInput,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{Reject{}} })},
		{Name: "reject with tcp reset", Kernel: "nft_reject", PerFamily: true, Hook: hookFilterInput,
			Rule: rule(func(ExampleFlow) []Expr { return []Expr{tcp, Reject{TCPReset: true}} })},
	}
}

// ExamplesFor returns the examples that show an expression type (their
// rule's last expression) a rule of one of tables uses: the part of the
// checklist a component that programs those tables needs.
func ExamplesFor(tables ...*Table) []Example {
	used := map[reflect.Type]bool{}
	for _, t := range tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				for _, e := range r.Exprs {
					used[reflect.TypeOf(e)] = true
				}
			}
		}
	}
	var out []Example
	for _, ex := range Examples() {
		xs := ex.Rule(ipfamily.IPv4).Exprs
		if used[reflect.TypeOf(xs[len(xs)-1])] {
			out = append(out, ex)
		}
	}
	return out
}
