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
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
)

var (
	vipKey  = []nft.Value{nft.A(netip.MustParseAddr("10.96.0.1")), nft.N(nft.ProtoTCP), nft.N(80)}
	vipKey2 = []nft.Value{nft.A(netip.MustParseAddr("10.96.0.2")), nft.N(nft.ProtoUDP), nft.N(53)}
)

// pair is a kernel connection and a fake kernel given the same transactions.
type pair struct {
	t    *testing.T
	ns   *netns.NS
	ctx  context.Context
	c    *Conn
	fake *nft.Fake
}

func newPair(t *testing.T, role string) *pair {
	ns, c := openNS(t, role)
	p := &pair{t: t, ns: ns, ctx: testCtx(t), c: c, fake: nft.NewFake()}
	p.apply(exampleTx())
	return p
}

// apply applies tx to both and fails the test unless both succeed.
func (p *pair) apply(tx *nft.Tx) {
	p.t.Helper()
	if err := p.fake.Apply(p.ctx, tx); err != nil {
		p.t.Fatalf("fake: %v", err)
	}
	if err := p.c.Apply(p.ctx, tx); err != nil {
		p.t.Fatalf("kernel: %v", err)
	}
	p.same()
}

// same requires the kernel's table to render as the fake's.
func (p *pair) same() string {
	p.t.Helper()
	want, err := p.fake.Read(p.ctx, ipfamily.IPv4, "t")
	if err != nil {
		p.t.Fatal(err)
	}
	got, err := p.c.Read(p.ctx, ipfamily.IPv4, "t")
	if err != nil {
		p.t.Fatal(err)
	}
	if d := cmp.Diff(want.Render(), got.Render()); d != "" {
		p.t.Fatalf("kernel differs from fake (-fake +kernel):\n%s", d)
	}
	return got.Render()
}

func TestIncremental(t *testing.T) {
	p := newPair(t, "nlinc")

	// Flush and refill a chain.
	tx := nft.NewTx(ipfamily.IPv4, "t")
	tx.FlushChain("svc/a:b")
	tx.AddRule("svc/a:b", nft.R(nft.Counter{}, nft.ProtoMatch{Proto: nft.ProtoUDP}, nft.DNAT{To: netip.MustParseAddrPort("10.1.0.2:53")}))
	tx.AddRule("svc/a:b", nft.R(nft.Verdict{Kind: nft.Drop}).WithComment("last"))
	p.apply(tx)

	// Change a map element's verdict: delete and add in one transaction.
	tx = nft.NewTx(ipfamily.IPv4, "t")
	tx.AddChain(&nft.Chain{Name: "other"})
	tx.AddRule("other", nft.R(nft.Verdict{Kind: nft.Accept}))
	tx.DeleteElements("service-ips", nft.Element{Key: vipKey})
	tx.AddElements("service-ips", nft.Element{Key: vipKey, Verdict: &nft.Verdict{Kind: nft.Jump, Chain: "other"}},
		nft.Element{Key: vipKey2, Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "svc/a:b"}})
	p.apply(tx)

	// A new connection knows nothing of the sets: it asks the kernel for the
	// key layout of the elements it adds.
	c2, err := New(p.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	first := p.c
	p.c = c2
	tx = nft.NewTx(ipfamily.IPv4, "t")
	tx.AddElements("service-ips", nft.Element{Key: []nft.Value{nft.A(netip.MustParseAddr("10.96.0.3")), nft.N(nft.ProtoSCTP), nft.N(9)}, Verdict: &nft.Verdict{Kind: nft.Drop}})
	p.apply(tx)
	if _, ok := c2.keys[tableID{ipfamily.IPv4, "t"}]["service-ips"]; !ok {
		t.Error("layout of service-ips not cached")
	}
	p.c = first

	// Delete elements, then the chains they pointed at, in one transaction.
	tx = nft.NewTx(ipfamily.IPv4, "t")
	tx.DeleteElements("service-ips", nft.Element{Key: vipKey}, nft.Element{Key: vipKey2})
	tx.DeleteChain("other")
	tx.DeleteChain("svc/a:b")
	tx.DeleteSet("affinity")
	p.apply(tx)
	if r := p.same(); strings.Contains(r, "svc/a:b") || strings.Contains(r, "other") || strings.Contains(r, "affinity") {
		t.Fatalf("chains or set not deleted:\n%s", r)
	}

	// Flush a set; delete and recreate the table in one transaction.
	tx = nft.NewTx(ipfamily.IPv4, "t")
	tx.FlushSet("service-ips")
	p.apply(tx)
	tx = exampleTx()
	tx.Ops = append([]nft.Op{{Kind: nft.OpDeleteTable}}, tx.Ops...)
	p.apply(tx)
}

// TestFailedTransactionChangesNothing runs the fake's failure cases against
// the kernel: each transaction must fail as a whole.
func TestFailedTransactionChangesNothing(t *testing.T) {
	el := nft.Element{Key: vipKey, Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "services"}}
	for _, tc := range []struct {
		name  string
		op    func(tx *nft.Tx)
		errno unix.Errno // 0: rejected before sending
		where string
	}{
		{"jump to missing chain", func(tx *nft.Tx) { tx.AddRule("services", nft.R(nft.JumpTo("nope"))) }, unix.ENOENT, "op 2 (add rule to services)"},
		{"jump to base chain", func(tx *nft.Tx) { tx.AddRule("services", nft.R(nft.JumpTo("nat-prerouting"))) }, unix.EOPNOTSUPP, "op 2"},
		{"delete referenced chain", func(tx *nft.Tx) { tx.DeleteChain("services") }, unix.EBUSY, "op 2 (delete chain services)"},
		{"delete chain referenced by element", func(tx *nft.Tx) { tx.FlushChain("svc/a:b"); tx.DeleteChain("svc/a:b") }, unix.EBUSY, "op 3"},
		{"element with other verdict", func(tx *nft.Tx) { tx.AddElements("service-ips", el) }, unix.EEXIST, "op 2"},
		{"delete missing element", func(tx *nft.Tx) {
			tx.DeleteElements("service-ips", nft.Element{Key: vipKey2})
		}, unix.ENOENT, "op 2"},
		{"wrong family key", func(tx *nft.Tx) {
			tx.AddElements("service-ips", nft.Element{Key: []nft.Value{nft.A(netip.MustParseAddr("fd00::1")), nft.N(nft.ProtoTCP), nft.N(80)}, Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "services"}})
		}, 0, "op 2"},
		{"vmap on a plain set", func(tx *nft.Tx) {
			tx.AddRule("services", nft.R(nft.VMap{Fields: []nft.Field{nft.FieldSaddr}, Map: "affinity"}))
		}, unix.EINVAL, "op 2"},
		{"delete used set", func(tx *nft.Tx) { tx.DeleteSet("service-ips") }, unix.EBUSY, "op 2 (delete set service-ips)"},
		{"create an existing table", func(tx *nft.Tx) { tx.CreateTable() }, unix.EEXIST, "op 2 (create table)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, "nlfail")
			before := p.same()
			g0, err := p.c.Generation(p.ctx)
			if err != nil {
				t.Fatal(err)
			}
			tx := nft.NewTx(ipfamily.IPv4, "t")
			tx.AddChain(&nft.Chain{Name: "extra"})
			tx.AddRule("extra", nft.R(nft.Counter{}))
			tc.op(tx)
			if err := p.fake.Apply(p.ctx, tx); err == nil {
				t.Fatal("fake accepted the transaction")
			}
			err = p.c.Apply(p.ctx, tx)
			if err == nil {
				t.Fatal("kernel accepted the transaction")
			}
			t.Logf("error: %v", err)
			if tc.errno != 0 && !errors.Is(err, tc.errno) {
				t.Errorf("error %v, want %v", err, tc.errno)
			}
			if !strings.Contains(err.Error(), tc.where) {
				t.Errorf("error %q does not name %q", err, tc.where)
			}
			if after := p.same(); after != before {
				t.Fatalf("failed transaction changed the table:\n%s", after)
			}
			if g1, _ := p.c.Generation(p.ctx); g1 != g0 {
				t.Errorf("generation %d → %d after a failed transaction", g0, g1)
			}
		})
	}
}

// TestLargeElementList adds and deletes thousands of elements in one op: the
// list is split over several messages of the same batch.
func TestLargeElementList(t *testing.T) {
	p := newPair(t, "nlbig")
	var els []nft.Element
	for i := range 3000 {
		els = append(els, nft.Element{
			Key:     []nft.Value{nft.A(netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)})), nft.N(nft.ProtoTCP), nft.N(uint32(1000 + i))},
			Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "svc/a:b"},
		})
	}
	tx := nft.NewTx(ipfamily.IPv4, "t")
	tx.AddElements("service-ips", els...)
	p.apply(tx)
	if msgs := p.c.lastBatch / elemChunk; msgs < 2 {
		t.Fatalf("batch of %d bytes: elements not split", p.c.lastBatch)
	}
	got, err := p.c.Read(p.ctx, ipfamily.IPv4, "t")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Sets["service-ips"].Elements); n != 3001 {
		t.Fatalf("%d elements, want 3001", n)
	}
	tx = nft.NewTx(ipfamily.IPv4, "t")
	tx.DeleteElements("service-ips", els...)
	p.apply(tx)
}

// TestReadWhileSetResizes reads a verdict map right after transactions that
// grow it by thousands of elements and shrink it again, while the kernel's
// deferred worker still resizes the map's hash table (nft_set_hash.c): each
// read must return exactly the elements the map holds.
func TestReadWhileSetResizes(t *testing.T) {
	_, c := openNS(t, "nlresize")
	ctx := testCtx(t)
	if err := c.Apply(ctx, exampleTx()); err != nil {
		t.Fatal(err)
	}
	var els []nft.Element
	for i := range 3000 {
		els = append(els, nft.Element{
			Key:     []nft.Value{nft.A(netip.AddrFrom4([4]byte{10, 98, byte(i >> 8), byte(i)})), nft.N(nft.ProtoUDP), nft.N(uint32(2000 + i))},
			Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "svc/a:b"},
		})
	}
	step := func(round int, what string, tx *nft.Tx, want []nft.Element) {
		t.Helper()
		if err := c.Apply(ctx, tx); err != nil {
			t.Fatalf("round %d, %s: %v", round, what, err)
		}
		got, err := c.Read(ctx, ipfamily.IPv4, "t")
		if err != nil {
			t.Fatalf("round %d, %s: %v", round, what, err)
		}
		s := got.Sets["service-ips"]
		missing := 0
		for _, e := range want {
			if _, ok := s.Elements[nft.KeyString(ipfamily.IPv4, s.Key, e.Key)]; !ok {
				missing++
			}
		}
		// The example table's own element stays throughout.
		if missing > 0 || len(s.Elements) != len(want)+1 {
			t.Fatalf("round %d, %s: read %d elements, want %d; %d missing", round, what, len(s.Elements), len(want)+1, missing)
		}
	}
	for round := range 10 {
		tx := nft.NewTx(ipfamily.IPv4, "t")
		tx.AddElements("service-ips", els...)
		step(round, "add 3000", tx, els)
		// 1001 elements left in 4096 buckets: below 30% load, the table shrinks.
		tx = nft.NewTx(ipfamily.IPv4, "t")
		tx.DeleteElements("service-ips", els[1000:]...)
		step(round, "delete 2000", tx, els[:1000])
		tx = nft.NewTx(ipfamily.IPv4, "t")
		tx.DeleteElements("service-ips", els[:1000]...)
		step(round, "delete 1000", tx, nil)
	}
}

// TestManyErrors fails a batch with an error for each of its tens of
// thousands of messages: more than the socket can queue. Apply must still
// report the failure promptly, and the connection keep working.
func TestManyErrors(t *testing.T) {
	p := newPair(t, "nlerrs")
	before := p.same()
	tx := nft.NewTx(ipfamily.IPv4, "t")
	for range 40000 {
		tx.AddRule("no-such-chain", nft.R(nft.Counter{}))
	}
	err := p.c.Apply(p.ctx, tx)
	if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("err = %v, want ENOENT or ENOBUFS", err)
	}
	t.Logf("error: %v", err)
	if after := p.same(); after != before {
		t.Fatalf("failed transaction changed the table:\n%s", after)
	}
	tx = nft.NewTx(ipfamily.IPv4, "t")
	tx.AddRule("services", nft.R(nft.Counter{}))
	p.apply(tx)
}
