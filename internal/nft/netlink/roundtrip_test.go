package netlink

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns/netnstest"

	"github.com/svcnet/svcnet/internal/nft"
)

// exampleTx is internal/nft's example transaction.
func exampleTx() *nft.Tx {
	tx := nft.NewTx(ipfamily.IPv4, "t")
	tx.AddTable()
	tx.AddSet(&nft.Set{Name: "service-ips", Comment: "frontends", Key: []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport}, Verdict: true})
	tx.AddSet(&nft.Set{Name: "affinity", Key: []nft.Field{nft.FieldSaddr}, Timeout: 3 * time.Hour})
	tx.AddChain(&nft.Chain{Name: "nat-prerouting", Hook: &nft.Hook{Type: "nat", Hook: "prerouting", Priority: -100}})
	tx.AddChain(&nft.Chain{Name: "services"})
	tx.AddChain(&nft.Chain{Name: "svc/a:b"})
	tx.AddRule("nat-prerouting", nft.R(nft.JumpTo("services")))
	tx.AddRule("services", nft.R(nft.VMap{Fields: []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport}, Map: "service-ips"}))
	tx.AddRule("svc/a:b", nft.R(
		nft.Daddr(nft.Host(netip.MustParseAddr("10.96.0.1"))),
		nft.AddrMatch{Field: nft.FieldSaddr, Neq: true, Prefix: netip.MustParsePrefix("10.0.0.0/8")},
		nft.Random{Mod: 2, Value: 1},
		nft.ProtoMatch{Proto: nft.ProtoTCP},
		nft.DNAT{To: netip.MustParseAddrPort("10.1.0.1:80")},
	).WithComment("ns/svc"))
	tx.AddRule("svc/a:b", nft.R(nft.Update{Set: "affinity", Fields: []nft.Field{nft.FieldSaddr}}, nft.MarkMatch{Mask: 0x4000}, nft.SetMark{Op: nft.MarkOr, Value: 0x4000}, nft.Reject{}))
	tx.AddElements("service-ips", nft.Element{Key: []nft.Value{nft.A(netip.MustParseAddr("10.96.0.1")), nft.N(nft.ProtoTCP), nft.N(80)}, Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "svc/a:b"}})
	return tx
}

var tcp = nft.ProtoMatch{Proto: nft.ProtoTCP}

// pick returns the IPv4 or the IPv6 form of an address or prefix.
func pick(f ipfamily.Family, v4, v6 string) string {
	if f == ipfamily.IPv6 {
		return v6
	}
	return v4
}

// everyExprTx builds a table that uses every expression of the model (and
// every form of each), in chains the kernel accepts: NAT only in nat chains,
// masquerade only behind postrouting, reject only behind input and forward;
// "misc" is referenced by nothing, so it is not hook-validated. Chain names
// avoid nft keywords so that nft(8) can load the rendering too.
func everyExprTx(f ipfamily.Family) *nft.Tx {
	a := func(v4, v6 string) netip.Addr { return netip.MustParseAddr(pick(f, v4, v6)) }
	p := func(v4, v6 string) netip.Prefix { return netip.MustParsePrefix(pick(f, v4, v6)) }
	svcKey := []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport}
	tx := nft.NewTx(f, "every")
	tx.AddTable()
	tx.AddSet(&nft.Set{Name: "affinity", Key: []nft.Field{nft.FieldSaddr}, Timeout: 10*time.Minute + 30*time.Second})
	tx.AddSet(&nft.Set{Name: "cluster-ips", Comment: "ClusterIPs", Key: svcKey})
	tx.AddSet(&nft.Set{Name: "sources", Key: []nft.Field{nft.FieldSaddr}})
	tx.AddSet(&nft.Set{Name: "service-ips", Key: svcKey, Verdict: true})
	tx.AddSet(&nft.Set{Name: "nodeports", Comment: "NodePort traffic", Key: []nft.Field{nft.FieldL4Proto, nft.FieldDport}, Verdict: true})
	tx.AddSet(&nft.Set{Name: "pairs", Key: []nft.Field{nft.FieldSaddr, nft.FieldDaddr, nft.FieldSport}})
	for _, c := range []*nft.Chain{
		{Name: "nat-prerouting", Hook: &nft.Hook{Type: "nat", Hook: "prerouting", Priority: -100}},
		{Name: "nat-output", Hook: &nft.Hook{Type: "nat", Hook: "output", Priority: -100}},
		{Name: "nat-postrouting", Hook: &nft.Hook{Type: "nat", Hook: "postrouting", Priority: 100}},
		{Name: "filter-input", Hook: &nft.Hook{Type: "filter", Hook: "input", Priority: 0}},
		{Name: "filter-forward", Hook: &nft.Hook{Type: "filter", Hook: "forward", Priority: -10}},
		{Name: "services"}, {Name: "svc"}, {Name: "ep0"}, {Name: "ep1"}, {Name: "mark-it"}, {Name: "masq-it"}, {Name: "masq-pods"}, {Name: "misc"},
	} {
		tx.AddChain(c)
	}
	tx.AddRule("nat-prerouting", nft.R(nft.JumpTo("services")))
	tx.AddRule("nat-output", nft.R(nft.FibLocal{}, nft.JumpTo("services")))
	tx.AddRule("nat-output", nft.R(nft.Daddr(nft.Host(a("10.96.0.10", "fd00:96::a"))), nft.ProtoMatch{Proto: nft.ProtoUDP}, nft.PortMatch{Field: nft.FieldDport, Port: 53}, nft.Redirect{Port: 40053}))
	tx.AddRule("nat-prerouting", nft.R(tcp, nft.PortMatch{Field: nft.FieldDport, Port: 30080}, nft.Redirect{Port: 8080}).WithComment("to a proxy port"))
	tx.AddRule("nat-postrouting", nft.R(nft.JumpTo("masq-it")))
	tx.AddRule("nat-postrouting", nft.R(nft.JumpTo("masq-pods")))
	tx.AddRule("filter-input", nft.R(nft.CtStateMatch{States: nft.CtNew | nft.CtRelated}, nft.FibLocal{Saddr: true}, nft.Counter{}))
	tx.AddRule("filter-input", nft.R(nft.Lookup{Fields: svcKey, Set: "cluster-ips", Neq: true}, tcp, nft.Reject{TCPReset: true}))
	tx.AddRule("filter-input", nft.R(nft.Lookup{Fields: svcKey, Set: "cluster-ips"}, nft.Reject{}).WithComment("reject traffic to invalid ports"))
	tx.AddRule("filter-forward", nft.R(nft.CtStateMatch{States: nft.CtInvalid}, nft.Verdict{Kind: nft.Drop}))
	tx.AddRule("filter-forward", nft.R(nft.MarkMatch{Mask: 0x8000, Value: 0x8000, Neq: true}, nft.Verdict{Kind: nft.Accept}))
	tx.AddRule("services", nft.R(nft.VMap{Fields: svcKey, Map: "service-ips"}))
	tx.AddRule("services", nft.R(nft.FibLocal{}, nft.VMap{Fields: []nft.Field{nft.FieldL4Proto, nft.FieldDport}, Map: "nodeports"}))
	tx.AddRule("svc", nft.R(nft.AddrMatch{Field: nft.FieldSaddr, Neq: true, Prefix: p("192.168.0.0/16", "fd00:192:168::/56")}, nft.JumpTo("mark-it")).WithComment("masquerade off-cluster traffic"))
	tx.AddRule("svc", nft.R(nft.IifnameMatch{Name: "veth", Prefix: true, Neq: true}, nft.JumpTo("mark-it")).WithComment("masquerade traffic not from a pod veth"))
	tx.AddRule("svc", nft.R(nft.Random{Mod: 2, Value: 0}, nft.GotoTo("ep0")))
	tx.AddRule("svc", nft.R(nft.GotoTo("ep1")))
	for i, ep := range []netip.Addr{a("192.168.1.10", "fd00:192:168:1::10"), a("192.168.2.10", "fd00:192:168:2::10")} {
		c := []string{"ep0", "ep1"}[i]
		tx.AddRule(c, nft.R(nft.Saddr(nft.Host(ep)), nft.JumpTo("mark-it")))
		tx.AddRule(c, nft.R(nft.Update{Set: "affinity", Fields: []nft.Field{nft.FieldSaddr}}, tcp, nft.DNAT{To: netip.AddrPortFrom(ep, 8080)}))
	}
	tx.AddRule("mark-it", nft.R(nft.SetMark{Op: nft.MarkOr, Value: 0x4000}))
	tx.AddRule("masq-it", nft.R(nft.MarkMatch{Mask: 0x4000, Value: 0}, nft.Verdict{Kind: nft.Return}))
	tx.AddRule("masq-it", nft.R(nft.SetMark{Op: nft.MarkXor, Value: 0x4000}))
	tx.AddRule("masq-it", nft.R(nft.Counter{}, nft.Masquerade{FullyRandom: true}))
	tx.AddRule("masq-it", nft.R(nft.Masquerade{}))
	// Egress masquerade's shapes: exempt destinations return, pod sources
	// are masqueraded (a prefix match and a nat statement in one rule).
	tx.AddRule("masq-pods", nft.R(nft.Daddr(p("192.168.0.0/16", "fd00:192:168::/56")), nft.Verdict{Kind: nft.Return}).WithComment("to a pod"))
	tx.AddRule("masq-pods", nft.R(nft.Daddr(p("169.254.0.0/16", "fe80::/10")), nft.Verdict{Kind: nft.Return}))
	tx.AddRule("masq-pods", nft.R(nft.Saddr(p("192.168.0.0/16", "fd00:192:168::/56")), nft.Masquerade{FullyRandom: true}).WithComment("leaving the cluster"))
	tx.AddRule("misc", nft.R(nft.PortMatch{Field: nft.FieldSport, Port: 53}, nft.AddrMatch{Field: nft.FieldDaddr, Prefix: p("10.0.0.0/12", "fd00::/12")}, nft.Verdict{Kind: nft.Accept}))
	tx.AddRule("misc", nft.R(nft.AddrMatch{Field: nft.FieldDaddr, Neq: true, Prefix: p("10.96.0.0/24", "fd00:96::/108")}, nft.ProtoMatch{Proto: nft.ProtoUDP}, nft.PortMatch{Field: nft.FieldDport, Port: 5353}))
	tx.AddRule("misc", nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldSaddr}, Set: "sources"}, nft.Lookup{Fields: []nft.Field{nft.FieldSaddr, nft.FieldDaddr, nft.FieldSport}, Set: "pairs"}))
	tx.AddRule("misc", nft.R(nft.ProtoMatch{Proto: nft.ProtoSCTP}, nft.AddrMatch{Field: nft.FieldSaddr, Prefix: p("0.0.0.0/0", "::/0")}, nft.AddrMatch{Field: nft.FieldSaddr, Prefix: p("128.0.0.0/1", "8000::/1")}))
	tx.AddRule("misc", nft.R(nft.IifnameMatch{Name: "cbr0"}, nft.IifnameMatch{Name: "abcdefghijklmno", Neq: true}, nft.Verdict{Kind: nft.Accept}))
	tx.AddRule("misc", nft.R(nft.IifnameMatch{Name: "cali", Prefix: true}, nft.Verdict{Kind: nft.Drop}))
	tx.AddRule("misc", nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.PortMatch{Field: nft.FieldDport, Port: 80}, nft.SetNftrace{}, nft.Counter{}))
	tx.AddRule("misc", nft.R(nft.Verdict{Kind: nft.Return}))
	k := func(addr string, proto uint8, port uint32) []nft.Value {
		return []nft.Value{nft.A(netip.MustParseAddr(addr)), nft.N(uint32(proto)), nft.N(port)}
	}
	tx.AddElements("cluster-ips",
		nft.Element{Key: k(pick(f, "10.96.0.1", "fd00:96::1"), nft.ProtoTCP, 443)},
		nft.Element{Key: k(pick(f, "10.96.0.10", "fd00:96::a"), nft.ProtoUDP, 53)})
	tx.AddElements("sources", nft.Element{Key: []nft.Value{nft.A(a("198.51.100.1", "2001:db8::1"))}})
	tx.AddElements("pairs", nft.Element{Key: []nft.Value{nft.A(a("198.51.100.1", "2001:db8::1")), nft.A(a("198.51.100.2", "2001:db8::2")), nft.N(1234)}})
	tx.AddElements("service-ips",
		nft.Element{Key: k(pick(f, "10.96.0.1", "fd00:96::1"), nft.ProtoTCP, 443), Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "svc"}},
		nft.Element{Key: k(pick(f, "10.96.0.2", "fd00:96::2"), nft.ProtoTCP, 80), Verdict: &nft.Verdict{Kind: nft.Jump, Chain: "ep1"}},
		nft.Element{Key: k(pick(f, "10.96.0.3", "fd00:96::3"), nft.ProtoSCTP, 9), Verdict: &nft.Verdict{Kind: nft.Drop}},
		nft.Element{Key: k(pick(f, "10.96.0.4", "fd00:96::4"), nft.ProtoUDP, 53), Verdict: &nft.Verdict{Kind: nft.Accept}})
	tx.AddElements("nodeports", nft.Element{Key: []nft.Value{nft.N(nft.ProtoTCP), nft.N(30080)}, Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "svc"}})
	return tx
}

// TestRoundTrip applies each table, reads it back and requires the same
// rendering as the fake kernel's, and requires `nft list table` to agree with
// the rendering (see normaliseList for the differences allowed).
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		tx   *nft.Tx
	}{
		{"example", exampleTx()},
		{"every-ip", everyExprTx(ipfamily.IPv4)},
		{"every-ip6", everyExprTx(ipfamily.IPv6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, c := openNS(t, "nlrt")
			ctx := testCtx(t)
			if err := c.Apply(ctx, tc.tx); err != nil {
				t.Fatal(err)
			}
			want, err := applyFake(t, tc.tx).Read(ctx, tc.tx.Family, tc.tx.Table)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Read(ctx, tc.tx.Family, tc.tx.Table)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want.Render(), got.Render()); d != "" {
				t.Errorf("read back (-want +got):\n%s", d)
			}
			listed := nftCmd(t, ns, "list", "table", nft.Keyword(tc.tx.Family), tc.tx.Table)
			if d := cmp.Diff(normaliseList(want.Render()), normaliseList(listed)); d != "" {
				t.Errorf("nft list vs render, normalised (-render +nft):\n%s\nnft list:\n%s", d, listed)
			}
			// Rule handles: as nft -a lists them, and as the fake numbers them.
			withHandles := nftCmd(t, ns, "-a", "list", "table", nft.Keyword(tc.tx.Family), tc.tx.Table)
			listedH := listedHandles(withHandles)
			if len(listedH) == 0 {
				t.Fatalf("nft -a listing not understood:\n%s", withHandles)
			}
			if d := cmp.Diff(listedH, ruleHandles(got)); d != "" {
				t.Errorf("rule handles (-nft -a +Read):\n%s", d)
			}
			if d := cmp.Diff(ruleHandles(want), ruleHandles(got)); d != "" {
				t.Errorf("rule handles (-fake +Read):\n%s", d)
			}
		})
	}
}

// ruleHandles returns the handles of each chain's rules, in rule order.
func ruleHandles(t *nft.Table) map[string][]uint64 {
	out := map[string][]uint64{}
	for n, c := range t.Chains {
		for _, r := range c.Rules {
			out[n] = append(out[n], r.Handle)
		}
	}
	return out
}

// listedHandles returns the rule handles of each chain in `nft -a list`
// output, in rule order.
func listedHandles(listing string) map[string][]uint64 {
	out := map[string][]uint64{}
	chain := ""
	for _, line := range strings.Split(listing, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "chain "):
			chain = strings.Trim(strings.Fields(line)[1], `"`)
			continue
		case strings.HasPrefix(line, "set ") || strings.HasPrefix(line, "map ") || line == "}":
			chain = ""
		}
		i := strings.LastIndex(line, "# handle ")
		if chain == "" || i < 0 || strings.HasPrefix(line, "type ") {
			continue
		}
		h, err := strconv.ParseUint(line[i+len("# handle "):], 10, 64)
		if err == nil {
			out[chain] = append(out[chain], h)
		}
	}
	return out
}

// TestCompilesLikeNft loads the same table twice, once through this package
// and once as rendered text through nft -f, and requires the kernel to hold
// the same expressions for both (as `nft --debug=netlink list table` prints
// them: registers, offsets, lengths, data, flags). The rendering is patched
// where nft 1.0.6 cannot load what Render prints (a nat output chain's
// priority is listed as -100, not dstnat).
func TestCompilesLikeNft(t *testing.T) {
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			ctx := testCtx(t)
			tx := everyExprTx(f)
			mine, c := openNS(t, "nlmine")
			if err := c.Apply(ctx, tx); err != nil {
				t.Fatal(err)
			}
			theirs := netnstest.New(t, "nlnft")
			want, _ := applyFake(t, tx).Read(ctx, f, tx.Table)
			text := strings.ReplaceAll(want.Render(), "hook output priority dstnat", "hook output priority -100")
			load := theirs.Command("nft", "-f", "-")
			load.Stdin = strings.NewReader(text)
			if out, err := load.CombinedOutput(); err != nil {
				t.Fatalf("nft -f: %v\n%s\n%s", err, out, text)
			}
			args := []string{"--debug=netlink", "list", "table", nft.Keyword(f), tx.Table}
			got, exp := normaliseDebug(nftCmd(t, mine, args...)), normaliseDebug(nftCmd(t, theirs, args...))
			if !strings.Contains(exp, "nat dnat") || !strings.Contains(exp, "element") {
				t.Fatalf("debug listing not understood:\n%s", exp)
			}
			if d := cmp.Diff(exp, got); d != "" {
				t.Errorf("kernel expressions (-nft +netlink):\n%s", d)
			}
		})
	}
}
