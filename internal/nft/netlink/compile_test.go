package netlink

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// encodeExprs frames xs as the kernel's NFTA_RULE_EXPRESSIONS list.
func encodeExprs(t *testing.T, fam byte, xs []expr.Any) []byte {
	t.Helper()
	var e enc
	for _, x := range xs {
		el := e.nest(unix.NFTA_LIST_ELEM)
		b, err := expr.Marshal(fam, x)
		if err != nil {
			t.Fatal(err)
		}
		e.b = append(e.b, b...)
		if err := e.endNest(el); err != nil {
			t.Fatal(err)
		}
	}
	return e.b
}

// TestCompileDecompile compiles every rule of the test tables, decodes the
// encoding and decompiles it: the rule must come back unchanged (pure; the
// kernel round trip is TestRoundTrip).
func TestCompileDecompile(t *testing.T) {
	for _, tx := range []*nft.Tx{exampleTx(), everyExprTx(ipfamily.IPv4), everyExprTx(ipfamily.IPv6)} {
		for _, op := range tx.Ops {
			if op.Kind != nft.OpAddRule {
				continue
			}
			xs, err := compileRule(nil, tx.Family, op.Rule)
			if err != nil {
				t.Fatalf("%s: %v", op.Rule.Render(tx.Family), err)
			}
			back, names, err := parseExprs(tx.Family.Proto(), encodeExprs(t, tx.Family.Proto(), xs))
			if err != nil || len(names) != len(xs) {
				t.Fatalf("%s: parse: %v (%d names)", op.Rule.Render(tx.Family), err, len(names))
			}
			got, err := decompile(tx.Family, back)
			if err != nil {
				t.Fatalf("%s: decompile: %v", op.Rule.Render(tx.Family), err)
			}
			if d := cmp.Diff(op.Rule.Render(tx.Family), (&nft.Rule{Exprs: got, Comment: op.Rule.Comment}).Render(tx.Family)); d != "" {
				t.Errorf("round trip (-want +got):\n%s", d)
			}
		}
	}
}

// TestCompileLikeNft pins a few compilations to what nft 1.0.6 emits (as
// `nft --debug=netlink` shows them).
func TestCompileLikeNft(t *testing.T) {
	for _, tc := range []struct {
		f    ipfamily.Family
		e    nft.Expr
		want []expr.Any
	}{
		{ipfamily.IPv4, nft.Saddr(netip.MustParsePrefix("10.0.0.0/8")), []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 1},
			&expr.Cmp{Register: 1, Data: []byte{10}},
		}},
		{ipfamily.IPv4, nft.Saddr(netip.MustParsePrefix("10.1.2.3/12")), []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{0xff, 0xf0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Register: 1, Data: []byte{10, 0, 0, 0}},
		}},
		{ipfamily.IPv6, nft.VMap{Fields: []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport}, Map: "m"}, []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 2},
			&expr.Payload{DestRegister: 13, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: 1, IsDestRegSet: true, SetName: "m"},
		}},
		{ipfamily.IPv4, nft.Lookup{Fields: []nft.Field{nft.FieldL4Proto, nft.FieldDport}, Set: "s", Neq: true}, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: 1, SetName: "s", Invert: true},
		}},
		{ipfamily.IPv6, nft.Reject{}, []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 4}}},
		{ipfamily.IPv4, nft.SetNftrace{}, []expr.Any{
			&expr.Immediate{Register: 1, Data: []byte{1}},
			&expr.Meta{Key: expr.MetaKeyNFTRACE, SourceRegister: true, Register: 1},
		}},
		{ipfamily.IPv4, nft.IifnameMatch{Name: "cbr0"}, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Register: 1, Data: []byte{'c', 'b', 'r', '0', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		}},
		{ipfamily.IPv6, nft.IifnameMatch{Name: "veth", Prefix: true, Neq: true}, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte("veth")},
		}},
	} {
		got, err := compileExpr(nil, tc.f, tc.e)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", nft.RenderExpr(tc.f, tc.e), d)
		}
	}
}

func TestCompileRejects(t *testing.T) {
	for _, tc := range []struct {
		f ipfamily.Family
		e nft.Expr
	}{
		{ipfamily.IPv4, nft.Saddr(netip.MustParsePrefix("fd00::/8"))},
		{ipfamily.IPv6, nft.DNAT{To: netip.MustParseAddrPort("10.0.0.1:80")}},
		{ipfamily.IPv4, nft.PortMatch{Field: nft.FieldSaddr, Port: 1}},
		{ipfamily.IPv4, nft.Random{Mod: 0}},
		{ipfamily.IPv4, nft.Verdict{Kind: nft.Jump}},
		{ipfamily.IPv4, nft.Lookup{Set: "s"}},
		{ipfamily.IPv4, nft.SetMark{Op: 9}},
		{ipfamily.IPv4, nft.IifnameMatch{}},
		{ipfamily.IPv4, nft.IifnameMatch{Prefix: true}},
		{ipfamily.IPv4, nft.IifnameMatch{Name: "abcdefghijklmnop"}},
		{ipfamily.IPv4, nft.IifnameMatch{Name: "a\x00b"}},
	} {
		if _, err := compileExpr(nil, tc.f, tc.e); err == nil {
			t.Errorf("%#v compiled", tc.e)
		}
	}
}

// TestDecompileRefuses checks that kernel expressions that are close to, but
// not exactly, what svcnet compiles are not decompiled.
func TestDecompileRefuses(t *testing.T) {
	good := func() []expr.Any {
		xs, err := compileExpr(nil, ipfamily.IPv4, nft.ProtoMatch{Proto: 6})
		if err != nil {
			t.Fatal(err)
		}
		return xs
	}
	if _, err := decompile(ipfamily.IPv4, good()); err != nil {
		t.Fatalf("good rule refused: %v", err)
	}
	ifname := func(data []byte) []expr.Any {
		return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Register: 1, Data: data}}
	}
	for name, xs := range map[string][]expr.Any{
		"iifname with bytes after its NUL": ifname([]byte{'e', 't', 'h', 0, 'x', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
		"iifname NUL-terminated but short": ifname([]byte{'e', 't', 'h', 0}),
		"iifname prefix of 16 bytes":       ifname([]byte("abcdefghijklmnop")),
	} {
		if got, err := decompile(ipfamily.IPv4, xs); err == nil {
			t.Errorf("%s: decompiled to %v", name, got)
		}
	}
	for name, mutate := range map[string]func(xs []expr.Any) []expr.Any{
		"other register": func(xs []expr.Any) []expr.Any { xs[1].(*expr.Cmp).Register = 2; return xs },
		"greater than":   func(xs []expr.Any) []expr.Any { xs[1].(*expr.Cmp).Op = expr.CmpOpGt; return xs },
		"no compare":     func(xs []expr.Any) []expr.Any { return xs[:1] },
		"trailing payload": func(xs []expr.Any) []expr.Any {
			return append(xs, &expr.Payload{Base: 1, Offset: 9, Len: 1, DestRegister: 1})
		},
		"wide data": func(xs []expr.Any) []expr.Any { xs[1].(*expr.Cmp).Data = []byte{6, 0}; return xs },
	} {
		if got, err := decompile(ipfamily.IPv4, mutate(good())); err == nil {
			t.Errorf("%s: decompiled to %v", name, got)
		}
	}
}

func TestKeyLayout(t *testing.T) {
	l, err := layoutOf(ipfamily.IPv4, []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport})
	if err != nil {
		t.Fatal(err)
	}
	if l.magic() != 7<<12|12<<6|13 || l.keyLen() != 12 {
		t.Fatalf("magic %#x len %d", l.magic(), l.keyLen())
	}
	vals := []nft.Value{nft.A(netip.MustParseAddr("10.96.0.1")), nft.N(6), nft.N(80)}
	b, err := l.appendKey(nil, vals)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0}; !bytes.Equal(b, want) {
		t.Fatalf("key % x, want % x", b, want)
	}
	back, err := l.decodeKey(b)
	if err != nil || !cmp.Equal(back, vals, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
		t.Fatalf("decoded %v, %v", back, err)
	}
	l2, err := layoutFromMagic(l.magic(), 12)
	if err != nil || l2.String() != l.String() {
		t.Fatalf("from magic: %v %v", l2, err)
	}
	// A single field is not padded.
	one, _ := layoutOf(ipfamily.IPv6, []nft.Field{nft.FieldDport})
	if b, _ := one.appendKey(nil, []nft.Value{nft.N(443)}); !bytes.Equal(b, []byte{1, 187}) || one.keyLen() != 2 {
		t.Fatalf("single port key % x, len %d", b, one.keyLen())
	}
	for _, bad := range [][]nft.Value{
		{nft.A(netip.MustParseAddr("fd00::1")), nft.N(6), nft.N(80)},
		{nft.A(netip.MustParseAddr("10.0.0.1")), nft.N(256), nft.N(80)},
		{nft.A(netip.MustParseAddr("10.0.0.1")), nft.N(6), nft.N(65536)},
		{nft.A(netip.MustParseAddr("10.0.0.1"))},
	} {
		if _, err := l.appendKey(nil, bad); err == nil {
			t.Errorf("key %v encoded", bad)
		}
	}
	if _, err := layoutFromMagic(9, 6); err == nil || !strings.Contains(err.Error(), "not used") {
		t.Errorf("ether_addr key: %v", err)
	}
}

func TestWire(t *testing.T) {
	var e enc
	off := e.msg(unix.NFT_MSG_NEWTABLE, unix.NLM_F_REQUEST, 7, unix.NFPROTO_IPV4)
	e.str(unix.NFTA_TABLE_NAME, "abc")
	n := e.nest(unix.NFTA_CHAIN_HOOK)
	e.u32(unix.NFTA_HOOK_HOOKNUM, 3)
	if err := e.endNest(n); err != nil {
		t.Fatal(err)
	}
	e.end(off)
	renumber(e.b, 42)
	msgs, err := parseMsgs(e.b, nil)
	if err != nil || len(msgs) != 1 || msgs[0].seq != 42 || msgs[0].typ != unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWTABLE {
		t.Fatalf("parsed %+v, %v", msgs, err)
	}
	a, _ := payload(msgs[0])
	var name string
	var hook uint32
	for a.next() {
		switch a.typ {
		case unix.NFTA_TABLE_NAME:
			name = a.str()
		case unix.NFTA_CHAIN_HOOK:
			in := newAttrs(a.val)
			for in.next() {
				hook = in.u32()
			}
		}
	}
	if a.err != nil || name != "abc" || hook != 3 {
		t.Fatalf("name %q hook %d err %v", name, hook, a.err)
	}
	// Malformed input stops iteration with an error.
	bad := newAttrs([]byte{200, 0, 1, 0, 1})
	if bad.next() || bad.err == nil {
		t.Fatal("malformed attribute accepted")
	}
	if s, ok := udataString([]byte{0, 200, 'x'}, 0); ok {
		t.Fatalf("truncated user data gave %q", s)
	}
}

// TestBuildRejects checks what the batch builder refuses before anything is
// sent.
func TestBuildRejects(t *testing.T) {
	long := strings.Repeat("x", 254)
	for name, op := range map[string]func(tx *nft.Tx){
		"long rule comment": func(tx *nft.Tx) { tx.AddRule("c", nft.R(nft.Counter{}).WithComment(long)) },
		"long set comment": func(tx *nft.Tx) {
			tx.AddSet(&nft.Set{Name: "s", Key: []nft.Field{nft.FieldDport}, Verdict: true, Comment: long[:245]})
		},
		"empty chain name": func(tx *nft.Tx) { tx.FlushChain("") },
		"long chain name":  func(tx *nft.Tx) { tx.AddChain(&nft.Chain{Name: strings.Repeat("c", 256)}) },
		"unknown hook": func(tx *nft.Tx) {
			tx.AddChain(&nft.Chain{Name: "c", Hook: &nft.Hook{Type: "nat", Hook: "ingress"}})
		},
		"unknown chain type": func(tx *nft.Tx) {
			tx.AddChain(&nft.Chain{Name: "c", Hook: &nft.Hook{Type: "route", Hook: "output"}})
		},
		"keyless set": func(tx *nft.Tx) { tx.AddSet(&nft.Set{Name: "s"}) },
		"map with timeout": func(tx *nft.Tx) {
			tx.AddSet(&nft.Set{Name: "s", Key: []nft.Field{nft.FieldSaddr}, Verdict: true, Timeout: 1e9})
		},
		"bad rule":    func(tx *nft.Tx) { tx.AddRule("c", nft.R(nft.Random{})) },
		"bad element": func(tx *nft.Tx) { tx.AddElements("s", nft.Element{Key: []nft.Value{nft.N(1)}}) },
		"verdict no chain": func(tx *nft.Tx) {
			tx.AddElements("s", nft.Element{Key: []nft.Value{nft.N(1), nft.N(2)}, Verdict: &nft.Verdict{Kind: nft.Goto}})
		},
	} {
		tx := nft.NewTx(ipfamily.IPv4, "t")
		tx.AddSet(&nft.Set{Name: "s", Key: []nft.Field{nft.FieldL4Proto, nft.FieldDport}, Verdict: true})
		op(tx)
		var b builder
		txs := []*nft.Tx{tx}
		b.reset(txs, 1)
		b.layouts = func(tableID, string) (keyLayout, error) { t.Fatal("no layout look-up expected"); return nil, nil }
		if err := b.build(txs); err == nil {
			t.Errorf("%s: built", name)
		} else if !strings.Contains(err.Error(), "table ip t: op 1") {
			t.Errorf("%s: error %q does not name table ip t, op 1", name, err)
		}
	}
}

// TestPrefixMask: the network mask of a prefix length, and back.
func TestPrefixMask(t *testing.T) {
	for _, c := range []struct {
		bits, n int
		want    []byte
	}{
		{8, 4, []byte{0xff, 0, 0, 0}},
		{12, 4, []byte{0xff, 0xf0, 0, 0}},
		{1, 4, []byte{0x80, 0, 0, 0}},
		{64, 16, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		if got := prefixMask(c.n, c.bits); !bytes.Equal(got, c.want) {
			t.Errorf("prefixMask(%d, %d) = %x, want %x", c.n, c.bits, got, c.want)
		}
		if got := prefixOf(c.want); got != c.bits {
			t.Errorf("prefixOf(%x) = %d, want %d", c.want, got, c.bits)
		}
	}
}
