package netlink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// UnrecognisedPrefix starts the Comment of a rule Read could not decompile
// into the nft vocabulary; such a rule has nil Exprs.
const UnrecognisedPrefix = "<unrecognised: "

// IsUnrecognised reports whether r stands for a kernel rule Read could not
// decompile.
func IsUnrecognised(r *nft.Rule) bool {
	return r.Exprs == nil && strings.HasPrefix(r.Comment, UnrecognisedPrefix)
}

func unrecognised(names []string, why error, comment string) *nft.Rule {
	c := UnrecognisedPrefix + strings.Join(names, " ")
	if why != nil {
		c += ": " + why.Error()
	}
	c += ">"
	if comment != "" {
		c += " " + comment
	}
	return &nft.Rule{Comment: c}
}

// parseExprs decodes the NFTA_RULE_EXPRESSIONS list. names has one entry per
// kernel expression; xs is nil when one of them is not decodable here.
func parseExprs(fam byte, b []byte) (xs []expr.Any, names []string, err error) {
	a := newAttrs(b)
	known := true
	for a.next() {
		if a.typ != unix.NFTA_LIST_ELEM {
			continue
		}
		var name string
		var data []byte
		in := newAttrs(a.val)
		for in.next() {
			switch in.typ {
			case unix.NFTA_EXPR_NAME:
				name = in.str()
			case unix.NFTA_EXPR_DATA:
				data = in.val
			}
		}
		if in.err != nil {
			return nil, names, in.err
		}
		names = append(names, name)
		e := newExpr(name)
		if e == nil {
			known = false
			continue
		}
		if err := expr.Unmarshal(fam, data, e); err != nil {
			return nil, names, fmt.Errorf("expression %s: %w", name, err)
		}
		// A verdict is an immediate writing the verdict register.
		if imm, ok := e.(*expr.Immediate); ok && imm.Register == regVerdict && len(imm.Data) == 0 {
			v := &expr.Verdict{}
			if err := expr.Unmarshal(fam, data, v); err != nil {
				return nil, names, fmt.Errorf("expression %s: %w", name, err)
			}
			e = v
		}
		xs = append(xs, e)
	}
	if a.err != nil {
		return nil, names, a.err
	}
	if !known {
		xs = nil
	}
	return xs, names, nil
}

// newExpr returns an empty expression of the kernel name, for the kinds
// svcnet's vocabulary compiles to; nil for any other.
func newExpr(name string) expr.Any {
	switch name {
	case "payload":
		return &expr.Payload{}
	case "cmp":
		return &expr.Cmp{}
	case "bitwise":
		return &expr.Bitwise{}
	case "meta":
		return &expr.Meta{}
	case "ct":
		return &expr.Ct{}
	case "fib":
		return &expr.Fib{}
	case "numgen":
		return &expr.Numgen{}
	case "lookup":
		return &expr.Lookup{}
	case "immediate":
		return &expr.Immediate{}
	case "nat":
		return &expr.NAT{}
	case "masq":
		return &expr.Masq{}
	case "redir":
		return &expr.Redir{}
	case "reject":
		return &expr.Reject{}
	case "dynset":
		return &expr.Dynset{}
	case "counter":
		return &expr.Counter{}
	}
	return nil
}

var errNoPattern = errors.New("no svcnet expression matches")

// decompile turns kernel expressions back into the nft vocabulary and checks
// that compiling the result gives exactly xs.
func decompile(f ipfamily.Family, xs []expr.Any) ([]nft.Expr, error) {
	d := decoder{f: f, xs: xs}
	var out []nft.Expr
	for d.i < len(xs) {
		e, n := d.next()
		if n == 0 {
			return nil, fmt.Errorf("expression %d: %w", d.i, errNoPattern)
		}
		out = append(out, e)
		d.i += n
	}
	back, err := compileRule(nil, f, &nft.Rule{Exprs: out})
	if err != nil {
		return nil, err
	}
	if len(back) != len(xs) {
		return nil, fmt.Errorf("recompiles to %d expressions, kernel has %d", len(back), len(xs))
	}
	for i := range back {
		if !sameExpr(back[i], xs[i]) {
			return nil, fmt.Errorf("expression %d differs from what svcnet compiles", i)
		}
	}
	return out, nil
}

// sameExpr compares two expressions, ignoring what the kernel adds or fills
// in on its own (counter values, set IDs, NAT range maxima equal to minima).
// The common kinds are compared field by field (Read compares every
// expression of every rule); the others through reflection.
func sameExpr(a, b expr.Any) bool {
	switch x := a.(type) {
	case *expr.Payload:
		y, ok := b.(*expr.Payload)
		return ok && *x == *y
	case *expr.Cmp:
		y, ok := b.(*expr.Cmp)
		return ok && x.Op == y.Op && x.Register == y.Register && bytes.Equal(x.Data, y.Data)
	case *expr.Meta:
		y, ok := b.(*expr.Meta)
		return ok && *x == *y
	case *expr.Bitwise:
		y, ok := b.(*expr.Bitwise)
		return ok && x.SourceRegister == y.SourceRegister && x.DestRegister == y.DestRegister && x.Len == y.Len &&
			bytes.Equal(x.Mask, y.Mask) && bytes.Equal(x.Xor, y.Xor)
	case *expr.Immediate:
		y, ok := b.(*expr.Immediate)
		return ok && x.Register == y.Register && bytes.Equal(x.Data, y.Data)
	case *expr.Verdict:
		y, ok := b.(*expr.Verdict)
		return ok && *x == *y
	case *expr.Counter:
		_, ok := b.(*expr.Counter)
		return ok
	}
	return reflect.DeepEqual(normalise(a), normalise(b))
}

func normalise(x expr.Any) expr.Any {
	switch x := x.(type) {
	case *expr.Lookup:
		c := *x
		c.SetID = 0
		return &c
	case *expr.Dynset:
		c := *x
		c.SetID = 0
		return &c
	case *expr.Redir:
		// The kernel fills in the maximum from the minimum.
		c := *x
		if c.RegisterProtoMax == c.RegisterProtoMin {
			c.RegisterProtoMax = 0
		}
		return &c
	case *expr.NAT:
		c := *x
		if c.RegAddrMax == c.RegAddrMin {
			c.RegAddrMax = 0
		}
		if c.RegProtoMax == c.RegProtoMin {
			c.RegProtoMax = 0
		}
		return &c
	}
	return x
}

type decoder struct {
	f  ipfamily.Family
	xs []expr.Any
	i  int
}

func (d *decoder) at(k int) expr.Any {
	if d.i+k < len(d.xs) {
		return d.xs[d.i+k]
	}
	return nil
}

// fieldOf recognises a full-width field load.
func (d *decoder) fieldOf(x expr.Any) (nft.Field, bool) {
	switch x := x.(type) {
	case *expr.Payload:
		if x.OperationType != expr.PayloadLoad {
			return 0, false
		}
		switch {
		case x.Base == expr.PayloadBaseNetworkHeader && int(x.Len) == d.f.AddrLen():
			for _, fld := range []nft.Field{nft.FieldSaddr, nft.FieldDaddr} {
				if off, _ := addrOffset(d.f, fld); off == x.Offset {
					return fld, true
				}
			}
		case x.Base == expr.PayloadBaseTransportHeader && x.Len == 2 && x.Offset == thDport:
			return nft.FieldDport, true
		case x.Base == expr.PayloadBaseTransportHeader && x.Len == 2 && x.Offset == thSport:
			return nft.FieldSport, true
		}
	case *expr.Meta:
		if !x.SourceRegister && x.Key == expr.MetaKeyL4PROTO {
			return nft.FieldL4Proto, true
		}
	}
	return 0, false
}

// next decodes one nft expression at d.i and returns it with the number of
// kernel expressions it spans (0: no match).
func (d *decoder) next() (nft.Expr, int) {
	switch x := d.at(0).(type) {
	case *expr.Payload, *expr.Meta:
		if m, ok := x.(*expr.Meta); ok && m.Key == expr.MetaKeyMARK && !m.SourceRegister {
			return d.mark()
		}
		if m, ok := x.(*expr.Meta); ok && m.Key == expr.MetaKeyIIFNAME && !m.SourceRegister {
			return d.iifname()
		}
		if e, n := d.prefix(); n > 0 {
			return e, n
		}
		return d.fields()
	case *expr.Ct:
		bw, ok1 := d.at(1).(*expr.Bitwise)
		c, ok2 := d.at(2).(*expr.Cmp)
		if x.Key == expr.CtKeySTATE && ok1 && ok2 && len(bw.Mask) == 4 && c.Op == expr.CmpOpNeq {
			return nft.CtStateMatch{States: nft.CtState(binary.NativeEndian.Uint32(bw.Mask))}, 3
		}
	case *expr.Fib:
		if c, ok := d.at(1).(*expr.Cmp); ok && x.ResultADDRTYPE && x.FlagSADDR != x.FlagDADDR && len(c.Data) == 4 &&
			binary.NativeEndian.Uint32(c.Data) == rtnLocal {
			return nft.FibLocal{Saddr: x.FlagSADDR}, 2
		}
	case *expr.Numgen:
		if c, ok := d.at(1).(*expr.Cmp); ok && x.Type == unix.NFT_NG_RANDOM && len(c.Data) == 4 {
			return nft.Random{Mod: x.Modulus, Value: binary.NativeEndian.Uint32(c.Data)}, 2
		}
	case *expr.Immediate:
		if m, ok := d.at(1).(*expr.Meta); ok && m.Key == expr.MetaKeyNFTRACE && m.SourceRegister &&
			x.Register == reg1 && m.Register == reg1 && bytes.Equal(x.Data, []byte{1}) {
			return nft.SetNftrace{}, 2
		}
		if r, ok := d.at(1).(*expr.Redir); ok && x.Register == reg1 && len(x.Data) == 2 && r.RegisterProtoMin == reg1 {
			return nft.Redirect{Port: binary.BigEndian.Uint16(x.Data)}, 2
		}
		port, ok1 := d.at(1).(*expr.Immediate)
		_, ok2 := d.at(2).(*expr.NAT)
		a, ok3 := addrFrom(d.f, x.Data)
		if ok1 && ok2 && ok3 && len(port.Data) == 2 {
			return nft.DNAT{To: netip.AddrPortFrom(a, binary.BigEndian.Uint16(port.Data))}, 3
		}
	case *expr.Verdict:
		switch x.Kind {
		case expr.VerdictAccept:
			return nft.Verdict{Kind: nft.Accept}, 1
		case expr.VerdictDrop:
			return nft.Verdict{Kind: nft.Drop}, 1
		case expr.VerdictReturn:
			return nft.Verdict{Kind: nft.Return}, 1
		case expr.VerdictJump:
			return nft.JumpTo(x.Chain), 1
		case expr.VerdictGoto:
			return nft.GotoTo(x.Chain), 1
		}
	case *expr.Masq:
		return nft.Masquerade{FullyRandom: x.FullyRandom}, 1
	case *expr.Reject:
		return nft.Reject{TCPReset: x.Type == unix.NFT_REJECT_TCP_RST}, 1
	case *expr.Counter:
		return nft.Counter{}, 1
	}
	return nil, 0
}

// mark decodes `meta mark & M ==/!= V` and `meta mark set meta mark |/^ V`.
func (d *decoder) mark() (nft.Expr, int) {
	bw, ok := d.at(1).(*expr.Bitwise)
	if !ok || len(bw.Mask) != 4 || len(bw.Xor) != 4 {
		return nil, 0
	}
	mask, xor := binary.NativeEndian.Uint32(bw.Mask), binary.NativeEndian.Uint32(bw.Xor)
	switch x := d.at(2).(type) {
	case *expr.Cmp:
		if len(x.Data) == 4 && xor == 0 {
			return nft.MarkMatch{Mask: mask, Value: binary.NativeEndian.Uint32(x.Data), Neq: x.Op == expr.CmpOpNeq}, 3
		}
	case *expr.Meta:
		if x.SourceRegister && x.Key == expr.MetaKeyMARK {
			switch {
			case mask == 0xffffffff:
				return nft.SetMark{Op: nft.MarkXor, Value: xor}, 3
			case mask == ^xor:
				return nft.SetMark{Op: nft.MarkOr, Value: xor}, 3
			}
		}
	}
	return nil, 0
}

// iifname decodes `iifname "NAME"` (the name NUL-padded to IFNAMSIZ) and
// `iifname "PREFIX*"` (the prefix's bytes alone, no NUL).
func (d *decoder) iifname() (nft.Expr, int) {
	c, ok := d.at(1).(*expr.Cmp)
	if !ok || len(c.Data) == 0 || len(c.Data) > nft.IfNameSize || (c.Op != expr.CmpOpEq && c.Op != expr.CmpOpNeq) {
		return nil, 0
	}
	neq := c.Op == expr.CmpOpNeq
	if i := bytes.IndexByte(c.Data, 0); i >= 0 {
		if len(c.Data) != nft.IfNameSize {
			return nil, 0
		}
		return nft.IifnameMatch{Name: string(c.Data[:i]), Neq: neq}, 2
	}
	return nft.IifnameMatch{Name: string(c.Data), Prefix: true, Neq: neq}, 2
}

// prefix decodes an address match whose load is shorter than the address or
// is masked.
func (d *decoder) prefix() (nft.Expr, int) {
	p, ok := d.at(0).(*expr.Payload)
	if !ok || p.OperationType != expr.PayloadLoad || p.Base != expr.PayloadBaseNetworkHeader {
		return nil, 0
	}
	var fld nft.Field
	for _, c := range []nft.Field{nft.FieldSaddr, nft.FieldDaddr} {
		if off, _ := addrOffset(d.f, c); off == p.Offset {
			fld = c
		}
	}
	alen := d.f.AddrLen()
	if fld == 0 || p.Len == 0 || int(p.Len) > alen {
		return nil, 0
	}
	if c, ok := d.at(1).(*expr.Cmp); ok && int(p.Len) < alen && len(c.Data) == int(p.Len) {
		b := make([]byte, alen)
		copy(b, c.Data)
		a, _ := addrFrom(d.f, b)
		return nft.AddrMatch{Field: fld, Neq: c.Op == expr.CmpOpNeq, Prefix: netip.PrefixFrom(a, 8*int(p.Len))}, 2
	}
	bw, ok1 := d.at(1).(*expr.Bitwise)
	c, ok2 := d.at(2).(*expr.Cmp)
	if ok1 && ok2 && int(p.Len) == alen && len(bw.Mask) == alen && len(c.Data) == alen {
		bits := prefixOf(bw.Mask)
		a, _ := addrFrom(d.f, c.Data)
		if bits >= 0 {
			return nft.AddrMatch{Field: fld, Neq: c.Op == expr.CmpOpNeq, Prefix: netip.PrefixFrom(a, bits)}, 3
		}
	}
	return nil, 0
}

// fields decodes a match on one field, or a concatenation used by a lookup,
// verdict map or set update.
func (d *decoder) fields() (nft.Expr, int) {
	var fields []nft.Field
	n := 0
	for {
		fld, ok := d.fieldOf(d.at(n))
		if !ok {
			break
		}
		fields = append(fields, fld)
		n++
	}
	if n == 0 {
		return nil, 0
	}
	switch x := d.at(n).(type) {
	case *expr.Cmp:
		if n != 1 || x.Register != reg1 {
			return nil, 0
		}
		switch fld := fields[0]; fld {
		case nft.FieldSaddr, nft.FieldDaddr:
			a, ok := addrFrom(d.f, x.Data)
			if !ok {
				return nil, 0
			}
			return nft.AddrMatch{Field: fld, Neq: x.Op == expr.CmpOpNeq, Prefix: nft.Host(a)}, 2
		case nft.FieldL4Proto:
			if len(x.Data) == 1 {
				return nft.ProtoMatch{Proto: x.Data[0]}, 2
			}
		case nft.FieldDport, nft.FieldSport:
			if len(x.Data) == 2 {
				return nft.PortMatch{Field: fld, Port: binary.BigEndian.Uint16(x.Data)}, 2
			}
		}
	case *expr.Lookup:
		if x.IsDestRegSet {
			return nft.VMap{Fields: fields, Map: x.SetName}, n + 1
		}
		return nft.Lookup{Fields: fields, Set: x.SetName, Neq: x.Invert}, n + 1
	case *expr.Dynset:
		if x.Operation == unix.NFT_DYNSET_OP_UPDATE {
			return nft.Update{Set: x.SetName, Fields: fields}, n + 1
		}
	}
	return nil, 0
}
