package netlink

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// Registers as nft(8) numbers them: it allocates 32-bit units and names a unit
// that starts a 128-bit register by that register (NFT_REG_1..4), any other
// unit by its 32-bit name (NFT_REG32_00..15). The kernel dumps them the same way.
const (
	regVerdict = unix.NFT_REG_VERDICT // 0
	reg1       = unix.NFT_REG_1       // 1: units 0-3
	reg2       = unix.NFT_REG_2       // 2: units 4-7
	reg32Base  = unix.NFT_REG32_00    // 8
)

// regOf returns nft's name of 32-bit unit u.
func regOf(u int) uint32 {
	if u%4 == 0 {
		return uint32(reg1 + u/4)
	}
	return uint32(reg32Base + u)
}

// Header offsets and lengths.
const (
	ip4Saddr, ip4Daddr = 12, 16
	ip6Saddr, ip6Daddr = 8, 24
	thSport, thDport   = 0, 2

	rtnLocal = 2 // RTN_LOCAL, the fib address type `local`

	icmpPortUnreach  = 3 // ICMP_PORT_UNREACH
	icmp6PortUnreach = 4 // ICMP6_DST_UNREACH_NOPORT
)

func addrOffset(f ipfamily.Family, fld nft.Field) (uint32, bool) {
	switch {
	case fld == nft.FieldSaddr && f == ipfamily.IPv6:
		return ip6Saddr, true
	case fld == nft.FieldDaddr && f == ipfamily.IPv6:
		return ip6Daddr, true
	case fld == nft.FieldSaddr:
		return ip4Saddr, true
	case fld == nft.FieldDaddr:
		return ip4Daddr, true
	}
	return 0, false
}

// fieldWidth is the number of bytes field fld occupies in a register.
func fieldWidth(f ipfamily.Family, fld nft.Field) int {
	switch fld {
	case nft.FieldSaddr, nft.FieldDaddr:
		return f.AddrLen()
	case nft.FieldL4Proto:
		return 1
	case nft.FieldDport, nft.FieldSport:
		return 2
	}
	return 0
}

// loadField returns the expression that loads fld into unit u.
func loadField(f ipfamily.Family, fld nft.Field, u int) (expr.Any, error) {
	r := regOf(u)
	switch fld {
	case nft.FieldSaddr, nft.FieldDaddr:
		off, _ := addrOffset(f, fld)
		return &expr.Payload{DestRegister: r, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(f.AddrLen())}, nil
	case nft.FieldL4Proto:
		return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: r}, nil
	case nft.FieldDport:
		return &expr.Payload{DestRegister: r, Base: expr.PayloadBaseTransportHeader, Offset: thDport, Len: 2}, nil
	case nft.FieldSport:
		return &expr.Payload{DestRegister: r, Base: expr.PayloadBaseTransportHeader, Offset: thSport, Len: 2}, nil
	}
	return nil, fmt.Errorf("unknown field %d", fld)
}

// loadConcat appends the loads of a concatenation into consecutive units
// starting at unit 0, as nft does for `a . b . c`.
func loadConcat(out []expr.Any, f ipfamily.Family, fields []nft.Field) ([]expr.Any, error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty concatenation")
	}
	u := 0
	for _, fld := range fields {
		e, err := loadField(f, fld, u)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		u += (fieldWidth(f, fld) + 3) / 4
	}
	if u > 16 {
		return nil, fmt.Errorf("concatenation of %d bytes exceeds the registers", 4*u)
	}
	return out, nil
}

func native32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func cmpOp(neq bool) expr.CmpOp {
	if neq {
		return expr.CmpOpNeq
	}
	return expr.CmpOpEq
}

// compileRule appends the kernel expressions of r to out.
func compileRule(out []expr.Any, f ipfamily.Family, r *nft.Rule) ([]expr.Any, error) {
	var err error
	for i, e := range r.Exprs {
		if out, err = compileExpr(out, f, e); err != nil {
			return nil, fmt.Errorf("expression %d (%s): %w", i, nft.RenderExpr(f, e), err)
		}
	}
	return out, nil
}

// compileExpr appends the kernel expressions of e, as nft(8) compiles it.
func compileExpr(out []expr.Any, f ipfamily.Family, e nft.Expr) ([]expr.Any, error) {
	switch e := e.(type) {
	case nft.AddrMatch:
		return compileAddr(out, f, e)
	case nft.ProtoMatch:
		return append(out,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{e.Proto}}), nil
	case nft.PortMatch:
		if e.Field != nft.FieldDport && e.Field != nft.FieldSport {
			return nil, fmt.Errorf("port match on field %d", e.Field)
		}
		ld, _ := loadField(f, e.Field, 0)
		return append(out, ld,
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binary.BigEndian.AppendUint16(nil, e.Port)}), nil
	case nft.CtStateMatch:
		return append(out,
			&expr.Ct{Key: expr.CtKeySTATE, Register: reg1},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: native32(uint32(e.States)), Xor: native32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: native32(0)}), nil
	case nft.FibLocal:
		return append(out,
			&expr.Fib{Register: reg1, FlagSADDR: e.Saddr, FlagDADDR: !e.Saddr, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: native32(rtnLocal)}), nil
	case nft.IifnameMatch:
		data, err := ifnameData(e)
		if err != nil {
			return nil, err
		}
		return append(out,
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: reg1},
			&expr.Cmp{Op: cmpOp(e.Neq), Register: reg1, Data: data}), nil
	case nft.MarkMatch:
		return append(out,
			&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: native32(e.Mask), Xor: native32(0)},
			&expr.Cmp{Op: cmpOp(e.Neq), Register: reg1, Data: native32(e.Value)}), nil
	case nft.Random:
		if e.Mod == 0 {
			return nil, fmt.Errorf("numgen modulus 0")
		}
		return append(out,
			&expr.Numgen{Register: reg1, Modulus: e.Mod, Type: unix.NFT_NG_RANDOM},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: native32(e.Value)}), nil
	case nft.Lookup:
		out, err := loadConcat(out, f, e.Fields)
		if err != nil {
			return nil, err
		}
		return append(out, &expr.Lookup{SourceRegister: reg1, SetName: e.Set, Invert: e.Neq}), nil
	case nft.VMap:
		out, err := loadConcat(out, f, e.Fields)
		if err != nil {
			return nil, err
		}
		return append(out, &expr.Lookup{SourceRegister: reg1, DestRegister: regVerdict, IsDestRegSet: true, SetName: e.Map}), nil
	case nft.Verdict:
		v, err := verdictOf(e)
		if err != nil {
			return nil, err
		}
		return append(out, v), nil
	case nft.DNAT:
		a := e.To.Addr()
		if !a.IsValid() || a.Is4() != (f == ipfamily.IPv4) || a.Is4In6() {
			return nil, fmt.Errorf("dnat address %s not of family %s", a, f)
		}
		return append(out,
			&expr.Immediate{Register: reg1, Data: a.AsSlice()},
			&expr.Immediate{Register: reg2, Data: binary.BigEndian.AppendUint16(nil, e.To.Port())},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: uint32(f.Proto()), RegAddrMin: reg1, RegProtoMin: reg2, Specified: true}), nil
	case nft.Masquerade:
		return append(out, &expr.Masq{FullyRandom: e.FullyRandom}), nil
	case nft.Redirect:
		if e.Port == 0 {
			return nil, fmt.Errorf("redirect to port 0")
		}
		// As nft: the port in reg 1, flags NF_NAT_RANGE_PROTO_SPECIFIED.
		return append(out,
			&expr.Immediate{Register: reg1, Data: binary.BigEndian.AppendUint16(nil, e.Port)},
			&expr.Redir{RegisterProtoMin: reg1, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED}), nil
	case nft.SetMark:
		var mask, xor uint32
		switch e.Op {
		case nft.MarkOr:
			mask, xor = ^e.Value, e.Value
		case nft.MarkXor:
			mask, xor = 0xffffffff, e.Value
		default:
			return nil, fmt.Errorf("unknown mark operation %d", e.Op)
		}
		return append(out,
			&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: native32(mask), Xor: native32(xor)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1}), nil
	case nft.SetNftrace:
		return append(out,
			&expr.Immediate{Register: reg1, Data: []byte{1}},
			&expr.Meta{Key: expr.MetaKeyNFTRACE, SourceRegister: true, Register: reg1}), nil
	case nft.Reject:
		if e.TCPReset {
			return append(out, &expr.Reject{Type: unix.NFT_REJECT_TCP_RST}), nil
		}
		code := uint8(icmpPortUnreach)
		if f == ipfamily.IPv6 {
			code = icmp6PortUnreach
		}
		return append(out, &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code}), nil
	case nft.Update:
		out, err := loadConcat(out, f, e.Fields)
		if err != nil {
			return nil, err
		}
		// No timeout: like nft for `update @s { k }`, the element gets the
		// set's default timeout.
		return append(out, &expr.Dynset{SrcRegKey: reg1, SetName: e.Set, Operation: unix.NFT_DYNSET_OP_UPDATE}), nil
	case nft.Counter:
		return append(out, &expr.Counter{}), nil
	}
	return nil, fmt.Errorf("unsupported expression %T", e)
}

// ifnameData is the comparison data of an interface name match, as nft
// compiles it: an exact name is compared with its NUL padding to IFNAMSIZ
// bytes; a prefix (`"veth*"`) only over its own bytes.
func ifnameData(e nft.IifnameMatch) ([]byte, error) {
	switch {
	case len(e.Name) >= nft.IfNameSize:
		return nil, fmt.Errorf("interface name %q longer than %d bytes", e.Name, nft.IfNameSize-1)
	case strings.IndexByte(e.Name, 0) >= 0:
		return nil, fmt.Errorf("interface name %q contains NUL", e.Name)
	case e.Name == "":
		return nil, fmt.Errorf("empty interface name") // nft refuses it too
	case e.Prefix:
		return []byte(e.Name), nil
	}
	b := make([]byte, nft.IfNameSize)
	copy(b, e.Name)
	return b, nil
}

// compileAddr compiles an address or prefix match. Like nft: a full-length
// prefix compares the address; a prefix on a byte boundary loads and compares
// only its bytes; any other prefix loads the address and masks it.
func compileAddr(out []expr.Any, f ipfamily.Family, e nft.AddrMatch) ([]expr.Any, error) {
	off, ok := addrOffset(f, e.Field)
	if !ok {
		return nil, fmt.Errorf("address match on field %d", e.Field)
	}
	p := e.Prefix
	if !p.IsValid() || p.Addr().Is4() != (f == ipfamily.IPv4) || p.Addr().Is4In6() {
		return nil, fmt.Errorf("prefix %s not of family %s", p, f)
	}
	p = p.Masked()
	alen := f.AddrLen()
	addr := p.Addr().AsSlice()
	bits := p.Bits()
	op := cmpOp(e.Neq)
	switch {
	case bits == alen*8:
		return append(out,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(alen)},
			&expr.Cmp{Op: op, Register: reg1, Data: addr}), nil
	case bits > 0 && bits%8 == 0:
		return append(out,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(bits / 8)},
			&expr.Cmp{Op: op, Register: reg1, Data: addr[:bits/8]}), nil
	}
	return append(out,
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(alen)},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: uint32(alen), Mask: prefixMask(alen, bits), Xor: make([]byte, alen)},
		&expr.Cmp{Op: op, Register: reg1, Data: addr}), nil
}

func prefixMask(n, bits int) []byte {
	m := make([]byte, n)
	for i := range m {
		switch {
		case bits >= 8:
			m[i] = 0xff
			bits -= 8
		case bits > 0:
			m[i] = byte(0xff << (8 - bits))
			bits = 0
		}
	}
	return m
}

// prefixOf returns the prefix length of a contiguous mask, or -1.
func prefixOf(m []byte) int {
	bits, done := 0, false
	for _, b := range m {
		for i := 7; i >= 0; i-- {
			set := b&(1<<i) != 0
			switch {
			case set && done:
				return -1
			case set:
				bits++
			default:
				done = true
			}
		}
	}
	return bits
}

func verdictOf(v nft.Verdict) (*expr.Verdict, error) {
	switch v.Kind {
	case nft.Accept:
		return &expr.Verdict{Kind: expr.VerdictAccept}, nil
	case nft.Drop:
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	case nft.Return:
		return &expr.Verdict{Kind: expr.VerdictReturn}, nil
	case nft.Jump, nft.Goto:
		if v.Chain == "" {
			return nil, fmt.Errorf("%s without a chain", v)
		}
		k := expr.VerdictJump
		if v.Kind == nft.Goto {
			k = expr.VerdictGoto
		}
		return &expr.Verdict{Kind: k, Chain: v.Chain}, nil
	}
	return nil, fmt.Errorf("unknown verdict %d", v.Kind)
}

// addrFrom returns the address of family f in b.
func addrFrom(f ipfamily.Family, b []byte) (netip.Addr, bool) {
	if len(b) != f.AddrLen() {
		return netip.Addr{}, false
	}
	if f == ipfamily.IPv6 {
		return netip.AddrFrom16([16]byte(b)), true
	}
	return netip.AddrFrom4([4]byte(b)), true
}
