package sim

import (
	"errors"
	"math/big"
	"net/netip"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// TestEnumerateFixture lists every candidate of the fixture's Services with
// its probability.
func TestEnumerateFixture(t *testing.T) {
	for _, fam := range families() {
		a := fixtureAddrs(fam)
		tbl := proxyTable(t, a)
		third := big.NewRat(1, 3)
		for _, tc := range []struct {
			name string
			pkt  Packet
			want []summary
			prob []*big.Rat
		}{{
			name: "ClusterIP from a pod: three endpoints, a third each, in rule order",
			pkt:  a.tcp(ap(a.pod, 40000), ap(a.svcA, 80)),
			want: []summary{
				{Verdict: Accepted, Delivery: DeliverForward, Final: Packet{Family: fam, Proto: nft.ProtoTCP, Src: ap(a.pod, 40000), Dst: a.epsA[0], CtState: nft.CtNew}},
				{Verdict: Accepted, Delivery: DeliverForward, Final: Packet{Family: fam, Proto: nft.ProtoTCP, Src: ap(a.pod, 40000), Dst: a.epsA[1], CtState: nft.CtNew}},
				{Verdict: Accepted, Delivery: DeliverForward, Final: Packet{Family: fam, Proto: nft.ProtoTCP, Src: ap(a.pod, 40000), Dst: a.epsA[2], CtState: nft.CtNew}},
			},
			prob: []*big.Rat{third, third, third},
		}, {
			name: "NodePort: masqueraded with the bridge or the node address by endpoint",
			pkt:  a.tcp(ap(a.client, 40000), ap(a.node, nodePortA)),
			want: []summary{
				{Verdict: Accepted, Delivery: DeliverForward, Final: Packet{Family: fam, Proto: nft.ProtoTCP, Src: ap(a.bridge, 40000), Dst: a.epsA[0], CtState: nft.CtNew}},
				{Verdict: Accepted, Delivery: DeliverForward, Final: Packet{Family: fam, Proto: nft.ProtoTCP, Src: ap(a.bridge, 40000), Dst: a.epsA[1], CtState: nft.CtNew}},
				{Verdict: Accepted, Delivery: DeliverForward, Final: Packet{Family: fam, Proto: nft.ProtoTCP, Src: ap(a.node, 40000), Dst: a.epsA[2], CtState: nft.CtNew}},
			},
			prob: []*big.Rat{third, third, third},
		}, {
			name: "no endpoints: one certain outcome",
			pkt:  a.tcp(ap(a.pod, 40000), ap(a.svcB, 53)),
			want: []summary{{Verdict: Rejected, Reject: RejectTCPReset, Final: Packet{Family: fam, Proto: nft.ProtoTCP, Src: ap(a.pod, 40000), Dst: ap(a.svcB, 53), CtState: nft.CtNew}}},
			prob: []*big.Rat{big.NewRat(1, 1)},
		}} {
			t.Run(fam.String()+"/"+tc.name, func(t *testing.T) {
				outs, err := New(nil, tbl).Enumerate(a.nodeContext(PathPrerouting, nil), tc.pkt)
				if err != nil {
					t.Fatal(err)
				}
				var got []summary
				var gotP []*big.Rat
				for _, o := range outs {
					got = append(got, summarize(o.Result))
					gotP = append(gotP, o.Probability)
				}
				if d := cmp.Diff(tc.want, got, cmpOpts); d != "" {
					t.Errorf("outcomes (-want +got):\n%s", d)
				}
				if d := cmp.Diff(tc.prob, gotP, cmpOpts); d != "" {
					t.Errorf("probabilities (-want +got):\n%s", d)
				}
			})
		}
	}
}

// TestEnumerateBranching checks the probability arithmetic on hand-built
// cascades: uneven splits, merged outcomes, choices that cannot branch, and
// sums of one.
func TestEnumerateBranching(t *testing.T) {
	dst := func(i int) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), uint16(1000+i)) }
	dnatTo := func(i int) *nft.Chain {
		return regular("ep"+string(rune('a'+i)), nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.DNAT{To: dst(i)}))
	}
	rnd := func(mod, v uint32, to string) *nft.Rule { return nft.R(nft.Random{Mod: mod, Value: v}, nft.GotoTo(to)) }
	for _, tc := range []struct {
		name  string
		rules []*nft.Rule
		want  map[string]string
	}{{
		name:  "four-way cascade",
		rules: []*nft.Rule{rnd(4, 0, "epa"), rnd(3, 0, "epb"), rnd(2, 0, "epc"), nft.R(nft.GotoTo("epd"))},
		want:  map[string]string{dst(0).String(): "1/4", dst(1).String(): "1/4", dst(2).String(): "1/4", dst(3).String(): "1/4"},
	}, {
		name:  "uneven",
		rules: []*nft.Rule{rnd(4, 3, "epa"), nft.R(nft.GotoTo("epb"))},
		want:  map[string]string{dst(0).String(): "1/4", dst(1).String(): "3/4"},
	}, {
		name:  "two branches, one outcome",
		rules: []*nft.Rule{rnd(2, 0, "epa"), nft.R(nft.GotoTo("epa"))},
		want:  map[string]string{dst(0).String(): "1"},
	}, {
		name:  "mod 1 always matches, a value out of range never",
		rules: []*nft.Rule{rnd(3, 3, "epb"), rnd(1, 0, "epa"), nft.R(nft.GotoTo("epb"))},
		want:  map[string]string{dst(0).String(): "1"},
	}, {
		name:  "nested draws",
		rules: []*nft.Rule{rnd(2, 0, "half"), rnd(3, 0, "epc"), nft.R(nft.GotoTo("epd"))},
		want:  map[string]string{dst(0).String(): "1/4", dst(1).String(): "1/4", dst(2).String(): "1/6", dst(3).String(): "1/3"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := table(ipfamily.IPv4, "t", []*nft.Chain{
				base("pre", "nat", "prerouting", -100, tc.rules...),
				regular("half", rnd(2, 1, "epa"), nft.R(nft.GotoTo("epb"))),
				dnatTo(0), dnatTo(1), dnatTo(2), dnatTo(3),
			})
			pkt := Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: mustAP("10.0.0.1:5"), Dst: mustAP("10.96.0.1:80")}
			outs, err := New(nil, tbl).Enumerate(Context{Path: PathPrerouting}, pkt)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, probs(outs)); d != "" {
				t.Errorf("probabilities (-want +got):\n%s", d)
			}
			sum := new(big.Rat)
			for _, o := range outs {
				sum.Add(sum, o.Probability)
			}
			if sum.Cmp(big.NewRat(1, 1)) != 0 {
				t.Errorf("probabilities sum to %s", sum.RatString())
			}
		})
	}
}

// TestEnumerateTooManyBranches bounds the runs of a pathological ruleset.
func TestEnumerateTooManyBranches(t *testing.T) {
	var rules []*nft.Rule
	for i := 0; i < 20; i++ { // 2^20 paths, none of them ending the chain
		rules = append(rules, nft.R(nft.Random{Mod: 2, Value: 0}, nft.Counter{}))
	}
	tbl := table(ipfamily.IPv4, "t", []*nft.Chain{base("f", "filter", "prerouting", 0, rules...)})
	pkt := Packet{Family: ipfamily.IPv4, Proto: nft.ProtoUDP, Src: mustAP("10.0.0.1:5"), Dst: mustAP("10.0.0.2:6")}
	_, err := New(nil, tbl).Enumerate(Context{Path: PathPrerouting}, pkt)
	if !errors.Is(err, ErrTooManyBranches) {
		t.Fatalf("err = %v, want ErrTooManyBranches", err)
	}
}

// BenchmarkEnumerateCascade enumerates a 1,000-endpoint cascade.
func BenchmarkEnumerateCascade(b *testing.B) {
	const n = 1000
	var chains []*nft.Chain
	var rules []*nft.Rule
	for i := range n {
		name := "ep" + strconv.Itoa(i)
		to := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i%250 + 1)}), 80)
		chains = append(chains, regular(name, nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.DNAT{To: to})))
		if i < n-1 {
			rules = append(rules, nft.R(nft.Random{Mod: uint32(n - i), Value: 0}, nft.GotoTo(name)))
		} else {
			rules = append(rules, nft.R(nft.GotoTo(name)))
		}
	}
	tbl := table(ipfamily.IPv4, "t", append(chains, base("pre", "nat", "prerouting", -100, rules...)))
	pkt := Packet{Family: ipfamily.IPv4, Proto: nft.ProtoTCP, Src: mustAP("10.0.0.1:1"), Dst: mustAP("10.96.0.1:80")}
	for b.Loop() {
		outs, err := New(nil, tbl).Enumerate(Context{Path: PathPrerouting}, pkt)
		if err != nil || len(outs) != n {
			b.Fatalf("%d outcomes, err %v", len(outs), err)
		}
	}
}

// TestRunChoicesFollowsAnOutcome: running an outcome's choices gives that
// outcome's result, and remembers its connection for the reply.
func TestRunChoicesFollowsAnOutcome(t *testing.T) {
	a := fixtureAddrs(ipfamily.IPv4)
	s := New(nil, proxyTable(t, a))
	ctx := a.nodeContext(PathPrerouting, nil)
	p := a.tcp(ap(a.client, 40000), ap(a.svcA, 80))
	outs, err := s.Enumerate(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) < 2 {
		t.Fatalf("want several outcomes, got %d", len(outs))
	}
	last := outs[len(outs)-1]
	res, err := s.RunChoices(ctx, p, last.Choices)
	if err != nil {
		t.Fatal(err)
	}
	if res.Final != last.Result.Final {
		t.Fatalf("RunChoices ended as %s, want %s", res.Final, last.Result.Final)
	}
	flows := s.Flows()
	if len(flows) != 1 || flows[0].ReplySrc != last.Result.Final.Dst {
		t.Fatalf("flows %+v, want one to %s", flows, last.Result.Final.Dst)
	}
}
