package nft

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/ipfamily"
)

func exampleTx() *Tx {
	tx := NewTx(ipfamily.IPv4, "t")
	tx.AddTable()
	tx.AddSet(&Set{Name: "service-ips", Comment: "frontends", Key: []Field{FieldDaddr, FieldL4Proto, FieldDport}, Verdict: true})
	tx.AddSet(&Set{Name: "affinity", Key: []Field{FieldSaddr}, Timeout: 3 * time.Hour})
	tx.AddChain(&Chain{Name: "nat-prerouting", Hook: &Hook{Type: "nat", Hook: "prerouting", Priority: -100}})
	tx.AddChain(&Chain{Name: "services"})
	tx.AddChain(&Chain{Name: "svc/a:b"})
	tx.AddRule("nat-prerouting", R(JumpTo("services")))
	tx.AddRule("services", R(VMap{Fields: []Field{FieldDaddr, FieldL4Proto, FieldDport}, Map: "service-ips"}))
	tx.AddRule("svc/a:b", R(
		Daddr(Host(netip.MustParseAddr("10.96.0.1"))),
		AddrMatch{Field: FieldSaddr, Neq: true, Prefix: netip.MustParsePrefix("10.0.0.0/8")},
		Random{Mod: 2, Value: 1},
		ProtoMatch{Proto: ProtoTCP},
		DNAT{To: netip.MustParseAddrPort("10.1.0.1:80")},
	).WithComment("ns/svc"))
	tx.AddRule("svc/a:b", R(Update{Set: "affinity", Fields: []Field{FieldSaddr}}, MarkMatch{Mask: 0x4000}, SetMark{Op: MarkOr, Value: 0x4000}, Reject{}))
	tx.AddElements("service-ips", Element{Key: []Value{A(netip.MustParseAddr("10.96.0.1")), N(ProtoTCP), N(80)}, Verdict: &Verdict{Kind: Goto, Chain: "svc/a:b"}})
	return tx
}

const exampleRender = `table ip t {
	set affinity {
		type ipv4_addr
		flags dynamic,timeout
		timeout 3h
	}

	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "frontends"
		elements = { 10.96.0.1 . tcp . 80 : goto "svc/a:b" }
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}

	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}

	chain "svc/a:b" {
		ip daddr 10.96.0.1 ip saddr != 10.0.0.0/8 numgen random mod 2 1 meta l4proto tcp dnat to 10.1.0.1:80 comment "ns/svc"
		update @affinity { ip saddr } meta mark & 0x00004000 == 0x00000000 meta mark set meta mark | 0x00004000 reject
	}
}
`

func TestFakeApplyAndRender(t *testing.T) {
	k := NewFake()
	ctx := context.Background()
	if err := k.Apply(ctx, exampleTx()); err != nil {
		t.Fatal(err)
	}
	got, err := k.Read(ctx, ipfamily.IPv4, "t")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(exampleRender, got.Render()); d != "" {
		t.Fatalf("render (-want +got):\n%s", d)
	}
}

func TestFakeRejectsBadTransactionsAtomically(t *testing.T) {
	ctx := context.Background()
	el := Element{Key: []Value{A(netip.MustParseAddr("10.96.0.1")), N(ProtoTCP), N(80)}, Verdict: &Verdict{Kind: Goto, Chain: "services"}}
	for _, tc := range []struct {
		name string
		op   func(tx *Tx)
		want string
	}{
		{"jump to missing chain", func(tx *Tx) { tx.AddRule("services", R(JumpTo("nope"))) }, "no such chain"},
		{"jump to base chain", func(tx *Tx) { tx.AddRule("services", R(JumpTo("nat-prerouting"))) }, "base chain"},
		{"delete referenced chain", func(tx *Tx) { tx.DeleteChain("services") }, "still referenced"},
		{"delete chain referenced by element", func(tx *Tx) { tx.FlushChain("svc/a:b"); tx.DeleteChain("svc/a:b") }, "element"},
		{"element with other verdict", func(tx *Tx) { tx.AddElements("service-ips", el) }, "another verdict"},
		{"delete missing element", func(tx *Tx) {
			tx.DeleteElements("service-ips", Element{Key: []Value{A(netip.MustParseAddr("10.96.0.9")), N(ProtoTCP), N(80)}})
		}, "no such element"},
		{"wrong family key", func(tx *Tx) {
			tx.AddElements("service-ips", Element{Key: []Value{A(netip.MustParseAddr("fd00::1")), N(ProtoTCP), N(80)}, Verdict: &Verdict{Kind: Goto, Chain: "services"}})
		}, "family"},
		{"vmap on a plain set", func(tx *Tx) { tx.AddRule("services", R(VMap{Fields: []Field{FieldSaddr}, Map: "affinity"})) }, "verdict map"},
		{"delete used set", func(tx *Tx) { tx.DeleteSet("service-ips") }, "still referenced"},
		{"create an existing table", func(tx *Tx) { tx.CreateTable() }, "table exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := NewFake()
			if err := k.Apply(ctx, exampleTx()); err != nil {
				t.Fatal(err)
			}
			tx := NewTx(ipfamily.IPv4, "t")
			tx.AddChain(&Chain{Name: "extra"})
			tc.op(tx)
			err := k.Apply(ctx, tx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			got, _ := k.Read(ctx, ipfamily.IPv4, "t")
			if got.Render() != exampleRender {
				t.Fatalf("failed transaction changed the table:\n%s", got.Render())
			}
		})
	}
}

// TestFakeReferencesFollowTheTransaction checks references against what the
// transaction did before the delete, also after an earlier delete in the
// same transaction (the first delete builds the fake's reference index; the
// ops after it must keep it up to date).
func TestFakeReferencesFollowTheTransaction(t *testing.T) {
	ctx := context.Background()
	key := []Value{A(netip.MustParseAddr("10.96.0.1")), N(ProtoTCP), N(80)}
	key2 := []Value{A(netip.MustParseAddr("10.96.0.2")), N(ProtoTCP), N(80)}
	toX := &Verdict{Kind: Goto, Chain: "x"}
	for _, tc := range []struct {
		name string
		ops  func(tx *Tx)
		want string // "" for success
	}{
		{"rule added after a delete", func(tx *Tx) {
			tx.AddRule("services", R(JumpTo("x")))
			tx.DeleteChain("x")
		}, "still referenced by a rule of chain services"},
		{"element added after a delete", func(tx *Tx) {
			tx.AddElements("service-ips", Element{Key: key2, Verdict: toX})
			tx.DeleteChain("x")
		}, "still referenced by element 10.96.0.2 . tcp . 80 of map service-ips"},
		{"element re-added then deleted", func(tx *Tx) {
			tx.AddElements("service-ips", Element{Key: key2, Verdict: toX}, Element{Key: key2, Verdict: toX})
			tx.DeleteElements("service-ips", Element{Key: key2})
			tx.DeleteChain("x")
		}, ""},
		{"rule flushed", func(tx *Tx) {
			tx.AddRule("services", R(JumpTo("x")))
			tx.FlushChain("services")
			tx.DeleteChain("x")
		}, ""},
		{"jumping chain deleted", func(tx *Tx) {
			tx.AddChain(&Chain{Name: "y"})
			tx.AddRule("y", R(JumpTo("x")))
			tx.DeleteChain("y")
			tx.DeleteChain("x")
		}, ""},
		{"set used by a rule added after a delete", func(tx *Tx) {
			tx.AddSet(&Set{Name: "s", Key: []Field{FieldSaddr}})
			tx.AddRule("x", R(Lookup{Fields: []Field{FieldSaddr}, Set: "s"}))
			tx.DeleteSet("s")
		}, "still referenced by a rule of chain x"},
		{"map flushed, then its chain and the map deleted", func(tx *Tx) {
			tx.FlushSet("service-ips")
			tx.FlushChain("services")
			tx.DeleteChain("svc/a:b")
			tx.DeleteSet("service-ips")
		}, ""},
		{"map deleted with its elements", func(tx *Tx) {
			tx.FlushChain("services")
			tx.DeleteSet("service-ips")
			tx.DeleteChain("svc/a:b")
		}, ""},
		{"element deleted, then still referenced by a rule", func(tx *Tx) {
			tx.DeleteElements("service-ips", Element{Key: key})
			tx.AddRule("services", R(JumpTo("svc/a:b")))
			tx.DeleteChain("svc/a:b")
		}, "still referenced by a rule of chain services"},
		{"table deleted and made again", func(tx *Tx) {
			tx.DeleteTable()
			tx.AddTable()
			tx.AddChain(&Chain{Name: "x"})
			tx.DeleteChain("x")
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := NewFake()
			if err := k.Apply(ctx, exampleTx()); err != nil {
				t.Fatal(err)
			}
			tx := NewTx(ipfamily.IPv4, "t")
			tx.AddChain(&Chain{Name: "x"})
			tx.AddChain(&Chain{Name: "first"})
			tx.DeleteChain("first")
			tc.ops(tx)
			err := k.Apply(ctx, tx)
			if tc.want == "" && err != nil {
				t.Fatalf("err = %v, want none", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestFakeDeleteInOrder(t *testing.T) {
	ctx := context.Background()
	k := NewFake()
	if err := k.Apply(ctx, exampleTx()); err != nil {
		t.Fatal(err)
	}
	g0, _ := k.Generation(ctx)
	tx := NewTx(ipfamily.IPv4, "t")
	tx.DeleteElements("service-ips", Element{Key: []Value{A(netip.MustParseAddr("10.96.0.1")), N(ProtoTCP), N(80)}})
	tx.DeleteChain("svc/a:b")
	if err := k.Apply(ctx, tx); err != nil {
		t.Fatal(err)
	}
	got, _ := k.Read(ctx, ipfamily.IPv4, "t")
	if _, ok := got.Chains["svc/a:b"]; ok {
		t.Fatal("chain not deleted")
	}
	if g1, _ := k.Generation(ctx); g1 == g0 {
		t.Fatal("generation not bumped")
	}
	del := NewTx(ipfamily.IPv4, "t")
	del.DeleteTable()
	if err := k.Apply(ctx, del); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Read(ctx, ipfamily.IPv4, "t"); err == nil {
		t.Fatal("table still there")
	}
}

// ruleHandles returns the handles of each chain's rules, in rule order.
func ruleHandles(t *Table) map[string][]uint64 {
	out := map[string][]uint64{}
	for n, c := range t.Chains {
		for _, r := range c.Rules {
			out[n] = append(out[n], r.Handle)
		}
	}
	return out
}

// TestFakeRuleHandles: the fake numbers chains, sets and rules from one
// counter per table, in the order the transaction creates them, as the
// kernel does (netlink's TestRoundTrip compares the two); the caller's rules
// keep handle 0, handles do not show in the rendering, and a table created
// again starts from 1.
func TestFakeRuleHandles(t *testing.T) {
	ctx := context.Background()
	k := NewFake()
	tx := exampleTx()
	if err := k.Apply(ctx, tx); err != nil {
		t.Fatal(err)
	}
	for _, op := range tx.Ops {
		if op.Rule != nil && op.Rule.Handle != 0 {
			t.Fatalf("the caller's rule got handle %d", op.Rule.Handle)
		}
	}
	got, _ := k.Read(ctx, ipfamily.IPv4, "t")
	// Sets 1 and 2, chains 3 to 5, then the rules.
	want := map[string][]uint64{"nat-prerouting": {6}, "services": {7}, "svc/a:b": {8, 9}}
	if d := cmp.Diff(want, ruleHandles(got)); d != "" {
		t.Fatalf("handles (-want +got):\n%s", d)
	}
	if got.Render() != exampleRender {
		t.Fatalf("handles changed the rendering:\n%s", got.Render())
	}

	more := NewTx(ipfamily.IPv4, "t")
	more.AddChain(&Chain{Name: "extra"})
	more.AddRule("services", R(Counter{}))
	more.FlushChain("nat-prerouting")
	more.AddRule("nat-prerouting", R(JumpTo("services")))
	if err := k.Apply(ctx, more); err != nil {
		t.Fatal(err)
	}
	got, _ = k.Read(ctx, ipfamily.IPv4, "t")
	want = map[string][]uint64{"nat-prerouting": {12}, "services": {7, 11}, "svc/a:b": {8, 9}}
	if d := cmp.Diff(want, ruleHandles(got)); d != "" {
		t.Fatalf("handles after a second transaction (-want +got):\n%s", d)
	}

	again := NewTx(ipfamily.IPv4, "t")
	again.DeleteTable()
	again.AddTable()
	again.AddChain(&Chain{Name: "c"})
	again.AddRule("c", R(Counter{}))
	if err := k.Apply(ctx, again); err != nil {
		t.Fatal(err)
	}
	got, _ = k.Read(ctx, ipfamily.IPv4, "t")
	if d := cmp.Diff(map[string][]uint64{"c": {2}}, ruleHandles(got)); d != "" {
		t.Fatalf("handles of a table created again (-want +got):\n%s", d)
	}
}
