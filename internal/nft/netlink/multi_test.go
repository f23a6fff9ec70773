package netlink

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// Tests of Apply with several tables in one batch, and of Tables.

// render reads the tables from k (kernel or fake) and renders them in order;
// a missing table renders as "<no table ...>".
func render(t *testing.T, ctx context.Context, k nft.Conn, ids ...tableID) string {
	t.Helper()
	var sb strings.Builder
	for _, id := range ids {
		tb, err := k.Read(ctx, id.fam, id.name)
		switch {
		case errors.Is(err, nft.ErrNoTable):
			sb.WriteString("<no table " + nft.Keyword(id.fam) + " " + id.name + ">\n")
		case err != nil:
			t.Fatal(err)
		default:
			sb.WriteString(tb.Render())
		}
	}
	return sb.String()
}

// tables returns k's tables of family f.
func tables(t *testing.T, ctx context.Context, k nft.Conn, f ipfamily.Family) []string {
	t.Helper()
	names, err := k.Tables(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func generation(t *testing.T, ctx context.Context, c *Conn) uint32 {
	t.Helper()
	g, err := c.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestBuildTables checks the batch of several txs without a kernel: one
// BEGIN … END, each message in its tx's family and mapped back to its
// (tx, op), empty txs skipped, set layouts local to their table.
func TestBuildTables(t *testing.T) {
	a := nft.NewTx(ipfamily.IPv4, "a")
	a.AddTable()
	a.AddSet(&nft.Set{Name: "s", Key: []nft.Field{nft.FieldDport}})
	a.AddElements("s", nft.Element{Key: []nft.Value{nft.N(80)}})
	b := nft.NewTx(ipfamily.IPv6, "b")
	b.AddTable()
	b.AddElements("s", nft.Element{Key: []nft.Value{nft.N(443)}}) // ip6 b's s: not a's
	txs := []*nft.Tx{a, nft.NewTx(ipfamily.IPv4, "empty"), b}

	var bl builder
	var asked []tableID
	bl.reset(txs, 1)
	bl.layouts = func(t tableID, set string) (keyLayout, error) {
		asked = append(asked, t)
		return layoutOf(t.fam, []nft.Field{nft.FieldDport})
	}
	if err := bl.build(txs); err != nil {
		t.Fatal(err)
	}
	if want := []tableID{{ipfamily.IPv6, "b"}}; !cmp.Equal(asked, want, cmp.AllowUnexported(tableID{})) {
		t.Errorf("layout look-ups %v, want %v", asked, want)
	}
	wantOps := []opRef{{-1, -1}, {0, 0}, {0, 1}, {0, 2}, {2, 0}, {2, 1}, {-1, -1}}
	if !cmp.Equal(bl.opOf, wantOps, cmp.AllowUnexported(opRef{})) {
		t.Fatalf("opOf %v, want %v", bl.opOf, wantOps)
	}
	msgs, err := parseMsgs(bl.b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(wantOps) {
		t.Fatalf("%d messages, want %d", len(msgs), len(wantOps))
	}
	if msgs[0].typ != unix.NFNL_MSG_BATCH_BEGIN || msgs[len(msgs)-1].typ != unix.NFNL_MSG_BATCH_END {
		t.Errorf("batch delimiters: types %#x … %#x", msgs[0].typ, msgs[len(msgs)-1].typ)
	}
	for i, m := range msgs[1 : len(msgs)-1] {
		want := uint8(unix.NFPROTO_IPV4)
		if wantOps[i+1].tx == 2 {
			want = unix.NFPROTO_IPV6
		}
		if m.data[0] != want || m.seq != uint32(i+2) {
			t.Errorf("message %d: family %d seq %d, want %d, %d", i+1, m.data[0], m.seq, want, i+2)
		}
	}

	// A build error names the table and the op.
	b.AddChain(&nft.Chain{Name: "c", Hook: &nft.Hook{Type: "nat", Hook: "ingress"}})
	bl.reset(txs, 1)
	bl.layouts = func(t tableID, set string) (keyLayout, error) {
		return layoutOf(t.fam, []nft.Field{nft.FieldDport})
	}
	if err := bl.build(txs); err == nil || !strings.Contains(err.Error(), "table ip6 b: op 2 (add chain c)") {
		t.Errorf("build error %v, want one naming table ip6 b, op 2", err)
	}
}

// TestApplyTables commits three tables (two families, two names) in one
// batch: the generation moves once, and each table reads back as the fake
// holds it; an empty tx among them creates nothing.
func TestApplyTables(t *testing.T) {
	_, c := openNS(t, "nlmulti")
	ctx := testCtx(t)
	txs := []*nft.Tx{exampleTx(), everyExprTx(ipfamily.IPv4), nft.NewTx(ipfamily.IPv6, "empty"), everyExprTx(ipfamily.IPv6)}
	ids := []tableID{{ipfamily.IPv4, "t"}, {ipfamily.IPv4, "every"}, {ipfamily.IPv6, "every"}, {ipfamily.IPv6, "empty"}}
	g0 := generation(t, ctx, c)
	if err := c.Apply(ctx, txs...); err != nil {
		t.Fatal(err)
	}
	if g1 := generation(t, ctx, c); g1 != g0+1 {
		t.Errorf("generation %d → %d, want one commit", g0, g1)
	}
	fake := nft.NewFake()
	if err := fake.Apply(ctx, txs...); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(render(t, ctx, fake, ids...), render(t, ctx, c, ids...)); d != "" {
		t.Errorf("read back (-fake +kernel):\n%s", d)
	}
	for _, id := range ids[:3] {
		if len(c.keys[id]) == 0 {
			t.Errorf("no layouts cached for %v", id)
		}
	}
}

// TestApplyTablesFails fails a two-table batch in its second table: both
// tables stay exactly as they were (and a new table is not created), the
// generation does not move, the error names the second table and its op,
// and the layout caches of both tables are dropped.
func TestApplyTablesFails(t *testing.T) {
	missing6 := nft.Element{Key: []nft.Value{nft.A(netip.MustParseAddr("fd00:96::99")), nft.N(nft.ProtoTCP), nft.N(1)}}
	for _, tc := range []struct {
		name  string
		table string // of the second tx
		fail  func(tx *nft.Tx)
		where string
	}{
		{"jump to missing chain", "every", func(tx *nft.Tx) { tx.AddRule("misc", nft.R(nft.JumpTo("nope"))) },
			"table ip6 every: op 2 (add rule to misc)"},
		{"delete missing element", "every", func(tx *nft.Tx) { tx.DeleteElements("service-ips", missing6) },
			"table ip6 every: op 2 (delete 1 elements from service-ips)"},
		{"new table", "new", func(tx *nft.Tx) { tx.AddRule("extra6", nft.R(nft.JumpTo("nope"))) },
			"table ip6 new: op 2 (add rule to extra6)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, c := openNS(t, "nlmfail")
			ctx := testCtx(t)
			if err := c.Apply(ctx, exampleTx(), everyExprTx(ipfamily.IPv6)); err != nil {
				t.Fatal(err)
			}
			ids := []tableID{{ipfamily.IPv4, "t"}, {ipfamily.IPv6, tc.table}}
			before, ruleset := render(t, ctx, c, ids...), nftCmd(t, ns, "list", "ruleset")
			g0 := generation(t, ctx, c)

			// The first table's part is valid: it changes chains, rules and
			// elements.
			first := nft.NewTx(ipfamily.IPv4, "t")
			first.AddChain(&nft.Chain{Name: "extra"})
			first.AddRule("extra", nft.R(nft.Counter{}))
			first.DeleteElements("service-ips", nft.Element{Key: vipKey})
			first.AddElements("service-ips", nft.Element{Key: vipKey2, Verdict: &nft.Verdict{Kind: nft.Jump, Chain: "extra"}})
			second := nft.NewTx(ipfamily.IPv6, tc.table)
			if tc.table == "new" {
				second.AddTable()
			}
			second.AddChain(&nft.Chain{Name: "extra6"})
			if tc.table != "new" {
				second.AddRule("extra6", nft.R(nft.Counter{}))
			}
			tc.fail(second)

			err := c.Apply(ctx, first, second)
			if err == nil {
				t.Fatal("kernel accepted the batch")
			}
			t.Logf("error: %v", err)
			for _, id := range ids { // checked before Read caches them again
				if _, ok := c.keys[id]; ok {
					t.Errorf("layouts of %v still cached after a failed batch", id)
				}
			}
			if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), tc.where) {
				t.Errorf("error %q, want ENOENT naming %q", err, tc.where)
			}
			if after := render(t, ctx, c, ids...); after != before {
				t.Errorf("failed batch changed the tables (-before +after):\n%s", cmp.Diff(before, after))
			}
			if after := nftCmd(t, ns, "list", "ruleset"); after != ruleset {
				t.Errorf("failed batch changed the ruleset (-before +after):\n%s", cmp.Diff(ruleset, after))
			}
			if g1 := generation(t, ctx, c); g1 != g0 {
				t.Errorf("generation %d → %d after a failed batch", g0, g1)
			}
			if got := tables(t, ctx, c, ipfamily.IPv6); !cmp.Equal(got, []string{"every"}) {
				t.Errorf("ip6 tables %q after a failed batch, want [every]", got)
			}

			// Without the failing op the batch commits.
			second.Ops = second.Ops[:len(second.Ops)-1]
			if tc.table != "new" {
				second.DeleteElements("service-ips", nft.Element{Key: []nft.Value{nft.A(netip.MustParseAddr("fd00:96::1")), nft.N(nft.ProtoTCP), nft.N(443)}})
			}
			if err := c.Apply(ctx, first, second); err != nil {
				t.Fatal(err)
			}
			fake := nft.NewFake()
			for _, txs := range [][]*nft.Tx{{exampleTx(), everyExprTx(ipfamily.IPv6)}, {first, second}} {
				if err := fake.Apply(ctx, txs...); err != nil {
					t.Fatalf("fake: %v", err)
				}
			}
			if d := cmp.Diff(render(t, ctx, fake, ids...), render(t, ctx, c, ids...)); d != "" {
				t.Errorf("after the repaired batch (-fake +kernel):\n%s", d)
			}
		})
	}
}

// TestTables lists the tables of each family: none in a new namespace, then
// exactly those created (by Apply or by nft(8)), sorted; tables of another
// family (inet) are not listed.
func TestTables(t *testing.T) {
	ns, c := openNS(t, "nltables")
	ctx := testCtx(t)
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		if got := tables(t, ctx, c, f); len(got) != 0 {
			t.Errorf("new namespace: %s tables %q", f, got)
		}
	}
	var txs []*nft.Tx
	for _, id := range []tableID{{ipfamily.IPv4, "b"}, {ipfamily.IPv6, "z"}, {ipfamily.IPv4, "a"}, {ipfamily.IPv6, "m"}} {
		tx := nft.NewTx(id.fam, id.name)
		tx.AddTable()
		txs = append(txs, tx)
	}
	if err := c.Apply(ctx, txs...); err != nil {
		t.Fatal(err)
	}
	nftCmd(t, ns, "add", "table", "ip", "c")
	nftCmd(t, ns, "add", "table", "inet", "x")
	want := map[ipfamily.Family][]string{ipfamily.IPv4: {"a", "b", "c"}, ipfamily.IPv6: {"m", "z"}}
	for f, w := range want {
		if got := tables(t, ctx, c, f); !cmp.Equal(got, w) {
			t.Errorf("%s tables %q, want %q", f, got, w)
		}
	}
}

// TestApplyOnlyEmpty sends nothing for a batch without ops: no txs, or only
// empty ones.
func TestApplyOnlyEmpty(t *testing.T) {
	_, c := openNS(t, "nlempty")
	ctx := testCtx(t)
	if err := c.Apply(ctx, exampleTx()); err != nil {
		t.Fatal(err)
	}
	g0, sent := generation(t, ctx, c), c.lastBatch
	c.lastBatch = 0
	for _, txs := range [][]*nft.Tx{nil, {nft.NewTx(ipfamily.IPv4, "t")}, {nft.NewTx(ipfamily.IPv4, "t"), nft.NewTx(ipfamily.IPv6, "u")}} {
		if err := c.Apply(ctx, txs...); err != nil {
			t.Fatalf("%d txs: %v", len(txs), err)
		}
	}
	if c.lastBatch != 0 {
		t.Errorf("a batch of %d bytes was built (the last real one was %d)", c.lastBatch, sent)
	}
	if g1 := generation(t, ctx, c); g1 != g0 {
		t.Errorf("generation %d → %d with only empty txs", g0, g1)
	}
	if got := tables(t, ctx, c, ipfamily.IPv6); len(got) != 0 {
		t.Errorf("ip6 tables %q, want none", got)
	}
}
