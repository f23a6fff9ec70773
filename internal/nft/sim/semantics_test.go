package sim

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

func mark(v uint32) *nft.Rule { return nft.R(nft.SetMark{Op: nft.MarkOr, Value: v}) }

var (
	accept = nft.Verdict{Kind: nft.Accept}
	drop   = nft.Verdict{Kind: nft.Drop}
	ret    = nft.Verdict{Kind: nft.Return}
)

// TestVerdicts checks nft's verdict semantics; the mark bits set show which
// rules ran.
func TestVerdicts(t *testing.T) {
	pkt := Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: mustAP("10.0.0.1:5"), Dst: mustAP("10.0.0.2:80")}
	dportMap := &nft.Set{Name: "m", Key: []nft.Field{nft.FieldDport}, Verdict: true, Elements: map[string]nft.Element{
		"99": {Key: []nft.Value{nft.N(99)}, Verdict: &accept},
	}}
	srcSet := &nft.Set{Name: "s", Key: []nft.Field{nft.FieldSaddr}, Elements: map[string]nft.Element{
		"10.0.0.1": {Key: []nft.Value{nft.A(mustA("10.0.0.1"))}},
	}}
	for _, tc := range []struct {
		name   string
		chains []*nft.Chain
		edit   func(p *Packet, c *Context)
		want   Verdict
		reject RejectKind
		mark   uint32
	}{{
		name: "accept ends the base chain only",
		chains: []*nft.Chain{
			base("b1", "filter", "prerouting", 0, mark(1), nft.R(accept), mark(2)),
			base("b2", "filter", "prerouting", 10, mark(4)),
		},
		want: Accepted, mark: 5,
	}, {
		name: "drop ends the packet",
		chains: []*nft.Chain{
			base("b1", "filter", "prerouting", 0, nft.R(drop), mark(2)),
			base("b2", "filter", "prerouting", 10, mark(4)),
		},
		want: Dropped,
	}, {
		name: "drop at a later hook",
		chains: []*nft.Chain{
			base("b1", "filter", "prerouting", 0, mark(1)),
			base("b2", "filter", "forward", 0, nft.R(drop)),
			base("b3", "filter", "postrouting", 0, mark(2)),
		},
		want: Dropped, mark: 1,
	}, {
		name: "return goes back to the rule after the jump",
		chains: []*nft.Chain{
			base("b", "filter", "prerouting", 0, nft.R(nft.JumpTo("c")), mark(4)),
			regular("c", mark(1), nft.R(ret), mark(2)),
		},
		want: Accepted, mark: 5,
	}, {
		name: "the end of a jumped chain returns",
		chains: []*nft.Chain{
			base("b", "filter", "prerouting", 0, nft.R(nft.JumpTo("c")), mark(4)),
			regular("c", mark(1)),
		},
		want: Accepted, mark: 5,
	}, {
		name: "goto does not come back: its chain returns to the jumper's caller",
		chains: []*nft.Chain{
			base("b", "filter", "prerouting", 0, nft.R(nft.JumpTo("c")), mark(8)),
			regular("c", nft.R(nft.GotoTo("d")), mark(2)),
			regular("d", mark(1)),
		},
		want: Accepted, mark: 9,
	}, {
		name: "return in a base chain applies the policy",
		chains: []*nft.Chain{
			base("b1", "filter", "prerouting", 0, nft.R(ret), mark(2)),
			base("b2", "filter", "prerouting", 10, mark(4)),
		},
		want: Accepted, mark: 4,
	}, {
		name: "accept in a jumped chain ends the base chain",
		chains: []*nft.Chain{
			base("b1", "filter", "prerouting", 0, nft.R(nft.JumpTo("c")), mark(2)),
			regular("c", nft.R(accept)),
			base("b2", "filter", "prerouting", 10, mark(4)),
		},
		want: Accepted, mark: 4,
	}, {
		name:   "vmap miss continues with the next rule",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0, nft.R(nft.VMap{Fields: []nft.Field{nft.FieldDport}, Map: "m"}), mark(1))},
		want:   Accepted, mark: 1,
	}, {
		name:   "vmap hit applies the element's verdict",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0, nft.R(nft.VMap{Fields: []nft.Field{nft.FieldDport}, Map: "m"}), mark(1))},
		edit:   func(p *Packet, _ *Context) { p.Dst = mustAP("10.0.0.2:99") },
		want:   Accepted,
	}, {
		name: "lookup and negated lookup",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0,
			nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldSaddr}, Set: "s"}, mark(1).Exprs[0]),
			nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldSaddr}, Set: "s", Neq: true}, mark(2).Exprs[0]),
			nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldDaddr}, Set: "s", Neq: true}, mark(4).Exprs[0]),
		)},
		want: Accepted, mark: 5,
	}, {
		name: "mark match, xor",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0,
			nft.R(nft.MarkMatch{Mask: 0x4000, Value: 0x4000}, nft.SetMark{Op: nft.MarkXor, Value: 0x4000}),
			nft.R(nft.MarkMatch{Mask: 0x4000, Value: 0x4000}, nft.SetMark{Op: nft.MarkOr, Value: 2}),
			nft.R(nft.MarkMatch{Mask: 0x4000, Value: 0x4000, Neq: true}, nft.SetMark{Op: nft.MarkOr, Value: 4}),
		)},
		edit: func(p *Packet, _ *Context) { p.Mark = 0x4001 },
		want: Accepted, mark: 5,
	}, {
		name: "ct state",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0,
			nft.R(nft.CtStateMatch{States: nft.CtNew}, drop),
			nft.R(nft.CtStateMatch{States: nft.CtEstablished | nft.CtRelated}, mark(1).Exprs[0]),
		)},
		edit: func(p *Packet, _ *Context) { p.CtState = nft.CtEstablished },
		want: Accepted, mark: 1,
	}, {
		name: "protocol and ports",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0,
			nft.R(nft.ProtoMatch{Proto: nft.ProtoUDP}, drop),
			nft.R(nft.PortMatch{Field: nft.FieldSport, Port: 5}, mark(1).Exprs[0]),
			nft.R(nft.PortMatch{Field: nft.FieldDport, Port: 80}, mark(2).Exprs[0]),
			nft.R(nft.PortMatch{Field: nft.FieldDport, Port: 5}, mark(4).Exprs[0]),
			nft.R(nft.AddrMatch{Field: nft.FieldDaddr, Prefix: mustP("10.0.0.0/24")}, nft.AddrMatch{Field: nft.FieldSaddr, Neq: true, Prefix: mustP("10.0.0.2/32")}, mark(8).Exprs[0]),
		)},
		want: Accepted, mark: 11,
	}, {
		name:   "fib daddr type local, and 127.0.0.0/8 is always local",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0, nft.R(nft.FibLocal{}, mark(1).Exprs[0]))},
		edit:   func(p *Packet, c *Context) { c.LocalAddrs = []netip.Addr{mustA("10.0.0.2")} },
		want:   Accepted, mark: 1,
	}, {
		name:   "fib daddr type local: not local",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0, nft.R(nft.FibLocal{}, mark(1).Exprs[0]))},
		want:   Accepted,
	}, {
		name: "iifname: exact, prefix and negated at prerouting and forward; none at postrouting",
		chains: []*nft.Chain{
			base("b", "filter", "prerouting", 0,
				nft.R(nft.IifnameMatch{Name: "cali1234"}, mark(1).Exprs[0]),
				nft.R(nft.IifnameMatch{Name: "cali"}, mark(2).Exprs[0]),
				nft.R(nft.IifnameMatch{Name: "cali", Prefix: true}, mark(4).Exprs[0]),
				nft.R(nft.IifnameMatch{Name: "cali", Prefix: true, Neq: true}, mark(8).Exprs[0])),
			base("f", "filter", "forward", 0, nft.R(nft.IifnameMatch{Name: "cali1234"}, mark(16).Exprs[0])),
			base("p", "filter", "postrouting", 0,
				nft.R(nft.IifnameMatch{Name: "cali", Prefix: true}, mark(32).Exprs[0]),
				nft.R(nft.IifnameMatch{Name: "cali", Prefix: true, Neq: true}, mark(64).Exprs[0])),
		},
		edit: func(_ *Packet, c *Context) { c.InIface = "cali1234" },
		want: Accepted, mark: 1 | 4 | 16 | 64,
	}, {
		name: "iifname of a locally sent packet: none at output, lo once back in to a local address",
		chains: []*nft.Chain{
			base("o", "filter", "output", 0,
				nft.R(nft.IifnameMatch{Name: "lo", Neq: true}, mark(1).Exprs[0]),
				nft.R(nft.IifnameMatch{Name: "lo"}, mark(2).Exprs[0])),
			base("i", "filter", "input", 0, nft.R(nft.IifnameMatch{Name: "lo"}, mark(4).Exprs[0])),
		},
		edit: func(p *Packet, c *Context) { c.Path, p.Dst = PathOutput, mustAP("127.0.0.1:80") },
		want: Accepted, mark: 1 | 4,
	}, {
		name:   "reject with tcp reset",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0, nft.R(nft.Reject{TCPReset: true}), mark(1))},
		want:   Rejected, reject: RejectTCPReset,
	}, {
		name:   "counter and update do not end the rule",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0, nft.R(nft.Counter{}, nft.Update{Set: "dyn", Fields: []nft.Field{nft.FieldSaddr}}, mark(1).Exprs[0]))},
		want:   Accepted, mark: 1,
	}, {
		name:   "meta nftrace set 1 does not end the rule or change the path",
		chains: []*nft.Chain{base("b", "filter", "prerouting", 0, nft.R(nft.SetNftrace{}, mark(1).Exprs[0]), mark(2))},
		want:   Accepted, mark: 3,
	}, {
		name:   "masquerade without an egress address drops",
		chains: []*nft.Chain{base("b", "nat", "postrouting", 100, nft.R(nft.Masquerade{}))},
		want:   Dropped,
	}, {
		name: "jumps nested 16 deep are allowed",
		chains: append([]*nft.Chain{base("b", "filter", "prerouting", 0, nft.R(nft.JumpTo("c1")))},
			chainRun(16, mark(1))...),
		want: Accepted, mark: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := &nft.Set{Name: "dyn", Key: []nft.Field{nft.FieldSaddr}, Timeout: time.Minute}
			tbl := table(ipfamily.IPv4, "t", tc.chains, dportMap, srcSet, dyn)
			p, ctx := pkt, Context{Path: PathPrerouting}
			if tc.edit != nil {
				tc.edit(&p, &ctx)
			}
			res, err := New(nil, tbl).Run(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tc.want || res.Reject != tc.reject || res.Final.Mark != tc.mark {
				t.Errorf("got %s %s mark 0x%x, want %s %s mark 0x%x\ntrace:\n%s",
					res.Verdict, res.Reject, res.Final.Mark, tc.want, tc.reject, tc.mark, renderTrace(res.Trace))
			}
		})
	}
}

// chainRun returns regular chains c1..cn, each jumping to the next; the last
// holds last.
func chainRun(n int, last *nft.Rule) []*nft.Chain {
	var out []*nft.Chain
	for i := 1; i <= n; i++ {
		name := "c" + strconv.Itoa(i)
		if i == n {
			out = append(out, regular(name, last))
		} else {
			out = append(out, regular(name, nft.R(nft.JumpTo("c"+strconv.Itoa(i+1)))))
		}
	}
	return out
}

// TestBadRulesets: what the kernel would refuse to load is an error, not a guess.
func TestBadRulesets(t *testing.T) {
	set := &nft.Set{Name: "s", Key: []nft.Field{nft.FieldSaddr}}
	vm := &nft.Set{Name: "vm", Key: []nft.Field{nft.FieldSaddr}, Verdict: true}
	pre := func(rules ...*nft.Rule) *nft.Chain { return base("b", "filter", "prerouting", 0, rules...) }
	for _, tc := range []struct {
		name   string
		chains []*nft.Chain
		want   string
	}{
		{"jump to a missing chain", []*nft.Chain{pre(nft.R(nft.JumpTo("nope")))}, "no such chain"},
		{"jump to a base chain", []*nft.Chain{pre(nft.R(nft.JumpTo("b2"))), base("b2", "filter", "input", 0)}, "base chain"},
		{"goto loop", []*nft.Chain{pre(nft.R(nft.GotoTo("c"))), regular("c", nft.R(nft.GotoTo("c")))}, "a loop"},
		{"jumps nested 17 deep", append([]*nft.Chain{pre(nft.R(nft.JumpTo("c1")))}, chainRun(17, mark(1))...), "deeper than 16"},
		{"lookup of a missing set", []*nft.Chain{pre(nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldSaddr}, Set: "nope"}))}, "no such set"},
		{"lookup with the wrong key", []*nft.Chain{pre(nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldSaddr, nft.FieldDport}, Set: "s"}))}, "key of 1 fields"},
		{"vmap on a plain set", []*nft.Chain{pre(nft.R(nft.VMap{Fields: []nft.Field{nft.FieldSaddr}, Map: "s"}))}, "not a verdict map"},
		{"lookup in a verdict map", []*nft.Chain{pre(nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldSaddr}, Set: "vm"}))}, "is a verdict map"},
		{"dnat in a filter chain", []*nft.Chain{pre(nft.R(nft.DNAT{To: mustAP("10.0.0.9:1")}))}, "dnat in base chain b"},
		{"dnat to another family", []*nft.Chain{base("n", "nat", "prerouting", -100, nft.R(nft.DNAT{To: mustAP("[fd00::1]:1")}))}, "not an address of family ip"},
		{"masquerade at prerouting", []*nft.Chain{base("n", "nat", "prerouting", -100, nft.R(nft.Masquerade{}))}, "masquerade in base chain n"},
		{"numgen mod 0", []*nft.Chain{pre(nft.R(nft.Random{Mod: 0}))}, "mod 0"},
		{"nat chain at forward", []*nft.Chain{base("n", "nat", "forward", 0)}, "nat chain at forward"},
		{"address match on a port", []*nft.Chain{pre(nft.R(nft.AddrMatch{Field: nft.FieldDport, Prefix: mustP("10.0.0.0/8")}))}, "address match on dport"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := table(ipfamily.IPv4, "t", tc.chains, set, vm)
			_, err := New(nil, tbl).Run(Context{Path: PathPrerouting}, Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: mustAP("10.0.0.1:5"), Dst: mustAP("10.0.0.2:80")})
			if !errors.Is(err, ErrBadRuleset) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadRuleset containing %q", err, tc.want)
			}
		})
	}
}

// TestBadInput rejects packets and contexts that cannot be simulated.
func TestBadInput(t *testing.T) {
	ok := Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: mustAP("10.0.0.1:5"), Dst: mustAP("10.0.0.2:80")}
	for _, tc := range []struct {
		name string
		ctx  Context
		edit func(p *Packet)
	}{
		{"no path", Context{}, func(*Packet) {}},
		{"no family", Context{Path: PathOutput}, func(p *Packet) { p.Family = 0 }},
		{"address of the other family", Context{Path: PathOutput}, func(p *Packet) { p.Dst = mustAP("[fd00::1]:80") }},
		{"v4-mapped address in ip6", Context{Path: PathOutput}, func(p *Packet) {
			p.Family, p.Src, p.Dst = ipfamily.IPv6, mustAP("[fd00::1]:5"), mustAP("[::ffff:10.0.0.2]:80")
		}},
		{"missing address", Context{Path: PathOutput}, func(p *Packet) { p.Src = netip.AddrPort{} }},
		{"input interface of a locally sent packet", Context{Path: PathOutput, InIface: "eth0"}, func(*Packet) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.edit(&p)
			if _, err := New(nil).Run(tc.ctx, p); !errors.Is(err, ErrBadInput) {
				t.Fatalf("err = %v, want ErrBadInput", err)
			}
			if _, err := New(nil).Enumerate(tc.ctx, p); !errors.Is(err, ErrBadInput) {
				t.Fatalf("enumerate err = %v, want ErrBadInput", err)
			}
		})
	}
}

// TestFailedRunKeepsState: a run that fails changes no state.
func TestFailedRunKeepsState(t *testing.T) {
	dyn := &nft.Set{Name: "dyn", Key: []nft.Field{nft.FieldSaddr}, Timeout: time.Hour}
	tbl := table(ipfamily.IPv4, "t", []*nft.Chain{base("b", "filter", "prerouting", 0,
		nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldSaddr}, Set: "dyn"}, nft.SetMark{Op: nft.MarkOr, Value: 1}),
		nft.R(nft.Update{Set: "dyn", Fields: []nft.Field{nft.FieldSaddr}}),
		nft.R(nft.ProtoMatch{Proto: nft.ProtoUDP}, nft.JumpTo("missing")),
	)}, dyn)
	s := New(nil, tbl)
	ctx := Context{Path: PathPrerouting}
	p := Packet{Family: ipfamily.IPv4, Proto: nft.ProtoUDP, Src: mustAP("10.0.0.1:5"), Dst: mustAP("10.0.0.2:80")}
	if _, err := s.Run(ctx, p); !errors.Is(err, ErrBadRuleset) {
		t.Fatalf("udp: err = %v", err)
	}
	p.Proto = nft.ProtoTCP
	var marks []uint32
	for range 2 {
		res, err := s.Run(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		marks = append(marks, res.Final.Mark)
	}
	if d := cmp.Diff([]uint32{0, 1}, marks); d != "" {
		t.Errorf("marks (-want +got):\n%s", d)
	}
}

// TestDeterministic: the same input gives the same Result, trace included.
func TestDeterministic(t *testing.T) {
	a := fixtureAddrs(ipfamily.IPv6)
	tbl := proxyTable(t, a)
	run := func() []Outcome {
		outs, err := New(nil, tbl).Enumerate(a.nodeContext(PathPrerouting, nil), a.tcp(ap(a.client, 4), ap(a.node, nodePortA)))
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	if d := cmp.Diff(run(), run(), cmpOpts); d != "" {
		t.Errorf("two runs differ:\n%s", d)
	}
}
