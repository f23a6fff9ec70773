package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// TestHookOrder: base chains of every table run by priority; nat chains run
// inside the kernel's NAT hook at -100, ordered among themselves, and stop
// once one has translated.
func TestHookOrder(t *testing.T) {
	a := fixtureAddrs(ipfamily.IPv4)
	other := table(ipfamily.IPv4, "other", []*nft.Chain{
		base("raw", "filter", "prerouting", -300, nft.R(nft.Counter{})),
		base("tie", "filter", "prerouting", -100, nft.R(nft.Counter{})),
		base("nat-early", "nat", "prerouting", -150,
			nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.PortMatch{Field: nft.FieldDport, Port: 8080}, nft.DNAT{To: mustAP("192.168.1.99:80")})),
		base("late", "filter", "prerouting", 0, nft.R(nft.Counter{})),
		base("nat-late", "nat", "prerouting", 50, nft.R(nft.Counter{})),
	})
	s := New(nil, proxyTable(t, a), other, table(ipfamily.IPv6, "v6", []*nft.Chain{base("ignored", "filter", "prerouting", -400)}))
	chains := func(res Result) []string {
		var out []string
		for _, st := range res.Trace {
			if st.Hook == HookPrerouting && (st.Action == ActChain || st.Action == ActNATSkip) {
				out = append(out, st.Table+"/"+st.Chain+" "+st.Action.String())
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		pkt  Packet
		want []string
		dst  string
	}{{
		name: "svcnet translates",
		pkt:  a.tcp(ap(a.client, 1), ap(a.svcA, 80)),
		want: []string{
			"other/raw chain", "svcnet/filter-prerouting chain", "other/tie chain",
			"other/nat-early chain", "svcnet/nat-prerouting chain", "other/nat-late nat-skip",
			"other/late chain",
		},
		dst: a.epsA[0].String(),
	}, {
		name: "an earlier nat chain translates: svcnet's is skipped",
		pkt:  a.tcp(ap(a.client, 1), ap(a.svcA, 8080)),
		want: []string{
			"other/raw chain", "svcnet/filter-prerouting chain", "other/tie chain",
			"other/nat-early chain", "svcnet/nat-prerouting nat-skip", "other/nat-late nat-skip",
			"other/late chain",
		},
		dst: "192.168.1.99:80",
	}, {
		name: "nobody translates: every nat chain runs",
		pkt:  a.tcp(ap(a.client, 1), ap(a.svcA, 81)),
		want: []string{
			"other/raw chain", "svcnet/filter-prerouting chain", "other/tie chain",
			"other/nat-early chain", "svcnet/nat-prerouting chain", "other/nat-late chain",
			"other/late chain",
		},
		dst: ap(a.svcA, 81).String(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Run(a.nodeContext(PathPrerouting, nil), tc.pkt)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, chains(res)); d != "" {
				t.Errorf("base chains (-want +got):\n%s", d)
			}
			if got := res.Final.Dst.String(); got != tc.dst {
				t.Errorf("final destination %s, want %s", got, tc.dst)
			}
		})
	}
}

// TestPaths checks the hooks each path takes.
func TestPaths(t *testing.T) {
	a := fixtureAddrs(ipfamily.IPv4)
	s := New(nil, proxyTable(t, a))
	hooks := func(res Result) []Hook {
		var out []Hook
		for _, st := range res.Trace {
			if st.Action == ActHook || st.Action == ActRoute {
				out = append(out, st.Hook)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		path     Path
		pkt      Packet
		want     []Hook
		delivery Delivery
	}{
		{"arriving, to the node", PathPrerouting, a.tcp(ap(a.client, 1), ap(a.node, 22)),
			[]Hook{HookPrerouting, HookRouting, HookInput}, DeliverLocal},
		{"arriving, through the node", PathPrerouting, a.tcp(ap(a.client, 1), ap(a.otherNode, 22)),
			[]Hook{HookPrerouting, HookRouting, HookForward, HookPostrouting}, DeliverForward},
		{"local process, out of the node", PathOutput, a.tcp(ap(a.node, 1), ap(a.otherNode, 22)),
			[]Hook{HookOutput, HookRouting, HookPostrouting}, DeliverOut},
		{"local process, to the node: loopback", PathOutput, a.tcp(ap(a.node, 1), ap(a.node, 22)),
			[]Hook{HookOutput, HookRouting, HookPostrouting, HookPrerouting, HookRouting, HookInput}, DeliverLocal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Run(a.nodeContext(tc.path, nil), tc.pkt)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, hooks(res)); d != "" {
				t.Errorf("hooks (-want +got):\n%s", d)
			}
			if res.Delivery != tc.delivery {
				t.Errorf("delivery %s, want %s", res.Delivery, tc.delivery)
			}
		})
	}
}

// TestLoopbackSkipsNATAfterOutput: a looped-back packet's connection already
// has its translations from output and postrouting, so the nat chains at
// prerouting and input do not run again.
func TestLoopbackSkipsNATAfterOutput(t *testing.T) {
	tbl := table(ipfamily.IPv4, "t", []*nft.Chain{
		base("out", "nat", "output", -100, nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.DNAT{To: mustAP("127.0.0.1:8080")})),
		base("pre", "nat", "prerouting", -100, nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.DNAT{To: mustAP("10.9.9.9:1")})),
		base("in", "nat", "input", 100, nft.R(nft.Counter{})),
	})
	res, err := New(nil, tbl).Run(Context{Path: PathOutput}, Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: mustAP("127.0.0.1:5"), Dst: mustAP("127.0.0.1:80")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range res.Trace {
		if st.Action == ActNATSkip || st.Action == ActDNAT {
			got = append(got, string(st.Hook)+" "+st.Chain+" "+st.Action.String()+": "+st.Detail)
		}
	}
	want := []string{
		"output out dnat: daddr 127.0.0.1:80 → 127.0.0.1:8080",
		"prerouting pre nat-skip: translation already bound at output by t out rule 0",
		"input in nat-skip: translation already bound at postrouting by no nat rule (no translation)",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("nat steps (-want +got):\n%s", d)
	}
	if res.Delivery != DeliverLocal || res.Final.Dst != mustAP("127.0.0.1:8080") {
		t.Errorf("delivery %s final %s", res.Delivery, res.Final)
	}
}
