package netlink

import (
	"fmt"
	"net/netip"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
)

// scaleServices is the size of the benchmark-style table.
const scaleServices = 10000

var keySvc = []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport}

// scaleSkeleton adds the table, its maps and base chains.
func scaleSkeleton(tx *nft.Tx) {
	tx.AddTable()
	tx.AddSet(&nft.Set{Name: "service-ips", Key: keySvc, Verdict: true, Comment: "ClusterIP traffic"})
	for _, c := range []*nft.Chain{
		{Name: "nat-prerouting", Hook: &nft.Hook{Type: "nat", Hook: "prerouting", Priority: -100}},
		{Name: "nat-output", Hook: &nft.Hook{Type: "nat", Hook: "output", Priority: -100}},
		{Name: "nat-postrouting", Hook: &nft.Hook{Type: "nat", Hook: "postrouting", Priority: 100}},
		{Name: "services"}, {Name: "mark-for-masquerade"}, {Name: "masquerading"},
	} {
		tx.AddChain(c)
	}
	tx.AddRule("nat-prerouting", nft.R(nft.JumpTo("services")))
	tx.AddRule("nat-output", nft.R(nft.JumpTo("services")))
	tx.AddRule("nat-postrouting", nft.R(nft.JumpTo("masquerading")))
	tx.AddRule("services", nft.R(nft.VMap{Fields: keySvc, Map: "service-ips"}))
	tx.AddRule("mark-for-masquerade", nft.R(nft.SetMark{Op: nft.MarkOr, Value: 0x4000}))
	tx.AddRule("masquerading", nft.R(nft.MarkMatch{Mask: 0x4000}, nft.Verdict{Kind: nft.Return}))
	tx.AddRule("masquerading", nft.R(nft.SetMark{Op: nft.MarkXor, Value: 0x4000}))
	tx.AddRule("masquerading", nft.R(nft.Masquerade{FullyRandom: true}))
}

// scaleService adds service i in the shape kube-proxy's nftables mode
// programs: a service chain with the masquerade-mark rule and a two-way
// numgen cascade, two endpoint chains, one verdict map element.
func scaleService(tx *nft.Tx, i int) {
	vip := netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)})
	// Names as the dataplane makes them, with '_' for '/' so that nft 1.0.6
	// (the reference) can load them too.
	svc := fmt.Sprintf("service-%08X-ns%d_svc%d_tcp_http", uint32(i*2654435761), i%50, i)
	tx.AddChain(&nft.Chain{Name: svc})
	eps := make([]string, 2)
	for j := range eps {
		ep := netip.AddrFrom4([4]byte{10, 200 + byte(j), byte(i >> 8), byte(i)})
		eps[j] = fmt.Sprintf("endpoint-%08X-ns%d_svc%d_tcp_http__%s_8080", uint32(i*40503+j), i%50, i, ep)
		tx.AddChain(&nft.Chain{Name: eps[j]})
		tx.AddRule(eps[j], nft.R(nft.Saddr(nft.Host(ep)), nft.JumpTo("mark-for-masquerade")))
		tx.AddRule(eps[j], nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.DNAT{To: netip.AddrPortFrom(ep, 8080)}))
	}
	tx.AddRule(svc, nft.R(nft.Daddr(nft.Host(vip)), nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.PortMatch{Field: nft.FieldDport, Port: 80},
		nft.AddrMatch{Field: nft.FieldSaddr, Neq: true, Prefix: netip.MustParsePrefix("10.200.0.0/15")}, nft.JumpTo("mark-for-masquerade")))
	tx.AddRule(svc, nft.R(nft.Random{Mod: 2, Value: 0}, nft.GotoTo(eps[0])))
	tx.AddRule(svc, nft.R(nft.GotoTo(eps[1])))
	tx.AddElements("service-ips", nft.Element{Key: []nft.Value{nft.A(vip), nft.N(nft.ProtoTCP), nft.N(80)}, Verdict: &nft.Verdict{Kind: nft.Goto, Chain: svc}})
}

func cpuTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// TestScale is a benchmark-style test: it logs figures and asserts only
// correctness. A full load of scaleServices services in one transaction, then
// 50 one-service transactions on top, then a Read of the whole table.
// SVCNET_NFT_PROFILE=file writes a CPU profile of the full load.
func TestScale(t *testing.T) {
	_, c := openNS(t, "nlscale")
	ctx := testCtx(t)

	tx := nft.NewTx(ipfamily.IPv4, "svcnet")
	scaleSkeleton(tx)
	for i := range scaleServices {
		scaleService(tx, i)
	}
	if p := os.Getenv("SVCNET_NFT_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	u0, s0 := cpuTimes()
	start := time.Now()
	if err := c.Apply(ctx, tx); err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	u1, s1 := cpuTimes()
	t.Logf("full load: %d services, %d ops, batch %d KiB: %v (user %v, sys %v)",
		scaleServices, tx.Len(), c.lastBatch>>10, full, u1-u0, s1-s0)

	var lat []time.Duration
	for i := range 50 {
		one := nft.NewTx(ipfamily.IPv4, "svcnet")
		scaleService(one, scaleServices+i)
		start := time.Now()
		if err := c.Apply(ctx, one); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	t.Logf("one-service change on %d services: p50 %v, p99 %v, max %v",
		scaleServices, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])

	start = time.Now()
	got, err := c.Read(ctx, ipfamily.IPv4, "svcnet")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read back: %d chains, %d elements: %v", len(got.Chains), len(got.Sets["service-ips"].Elements), time.Since(start))
	if n := len(got.Chains); n != 6+3*(scaleServices+50) {
		t.Errorf("read %d chains, want %d", n, 6+3*(scaleServices+50))
	}
	if n := len(got.Sets["service-ips"].Elements); n != scaleServices+50 {
		t.Errorf("read %d elements, want %d", n, scaleServices+50)
	}
	for name, ch := range got.Chains {
		for _, r := range ch.Rules {
			if IsUnrecognised(r) {
				t.Fatalf("chain %s: %s", name, r.Comment)
			}
		}
	}

	// The reference, in the same run: nft -f of the same table, then of
	// one-service scripts.
	ref := netnstest.New(t, "nlscaleref")
	text := strings.ReplaceAll(got.Render(), "hook output priority dstnat", "hook output priority -100")
	start = time.Now()
	nftScript(t, ref, text)
	nftFull := time.Since(start)
	var nftLat []time.Duration
	for i := range 10 {
		one := nft.NewTx(ipfamily.IPv4, "svcnet")
		scaleService(one, scaleServices+i)
		script := txScript(one)
		start := time.Now()
		nftScript(t, ref, script)
		nftLat = append(nftLat, time.Since(start))
	}
	slices.Sort(nftLat)
	t.Logf("nft -f reference: full load %v (netlink/nft %.2f), one-service change p50 %v (netlink/nft %.2f)",
		nftFull, full.Seconds()/nftFull.Seconds(), nftLat[len(nftLat)/2],
		lat[len(lat)/2].Seconds()/nftLat[len(nftLat)/2].Seconds())
}

// nftScript runs nft -f - with script in ns.
func nftScript(t *testing.T, ns *netns.NS, script string) {
	t.Helper()
	cmd := ns.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v\n%s", err, out)
	}
}

// txScript renders the chain, rule and element additions of tx as nft
// commands.
func txScript(tx *nft.Tx) string {
	var b strings.Builder
	for _, op := range tx.Ops {
		switch op.Kind {
		case nft.OpAddChain:
			fmt.Fprintf(&b, "add chain %s %s %s\n", nft.Keyword(tx.Family), tx.Table, op.Name)
		case nft.OpAddRule:
			fmt.Fprintf(&b, "add rule %s %s %s %s\n", nft.Keyword(tx.Family), tx.Table, op.Name, op.Rule.Render(tx.Family))
		case nft.OpAddElements:
			for _, e := range op.Elements {
				fmt.Fprintf(&b, "add element %s %s %s { %s : %s }\n", nft.Keyword(tx.Family), tx.Table, op.Name,
					nft.KeyString(tx.Family, keySvc, e.Key), e.Verdict)
			}
		}
	}
	return b.String()
}
