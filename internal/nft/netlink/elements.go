package netlink

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/google/nftables"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// keyLayout describes a set key: the datatype of each field. A key of several
// fields is a concatenation and each field is padded to 4 bytes, as nft does.
type keyLayout []nftables.SetDatatype

// layoutOf returns the key layout of a model set of family f.
func layoutOf(f ipfamily.Family, key []nft.Field) (keyLayout, error) {
	if len(key) == 0 {
		return nil, fmt.Errorf("set without a key")
	}
	l := make(keyLayout, len(key))
	for i, fld := range key {
		switch fld {
		case nft.FieldSaddr, nft.FieldDaddr:
			l[i] = nftables.TypeIPAddr
			if f == ipfamily.IPv6 {
				l[i] = nftables.TypeIP6Addr
			}
		case nft.FieldL4Proto:
			l[i] = nftables.TypeInetProto
		case nft.FieldDport, nft.FieldSport:
			l[i] = nftables.TypeInetService
		default:
			return nil, fmt.Errorf("set key field %d unknown", fld)
		}
	}
	return l, nil
}

// layoutFromMagic decodes the NFTA_SET_KEY_TYPE of a set (6 bits per field,
// first field highest), for the datatypes svcnet uses.
func layoutFromMagic(magic, keyLen uint32) (keyLayout, error) {
	var l keyLayout
	for m := magic; m != 0; m >>= nftables.SetConcatTypeBits {
		var t nftables.SetDatatype
		switch m & nftables.SetConcatTypeMask {
		case nftables.TypeIPAddr.GetNFTMagic():
			t = nftables.TypeIPAddr
		case nftables.TypeIP6Addr.GetNFTMagic():
			t = nftables.TypeIP6Addr
		case nftables.TypeInetProto.GetNFTMagic():
			t = nftables.TypeInetProto
		case nftables.TypeInetService.GetNFTMagic():
			t = nftables.TypeInetService
		default:
			return nil, fmt.Errorf("key type %#x: datatype %d not used by svcnet", magic, m&nftables.SetConcatTypeMask)
		}
		l = append(keyLayout{t}, l...)
	}
	if len(l) == 0 {
		return nil, fmt.Errorf("key type %#x unknown", magic)
	}
	if got := l.keyLen(); got != keyLen {
		return nil, fmt.Errorf("key type %#x: length %d, want %d", magic, keyLen, got)
	}
	return l, nil
}

// magic returns the NFTA_SET_KEY_TYPE value nft uses for the layout.
func (l keyLayout) magic() uint32 {
	if len(l) == 1 {
		return l[0].GetNFTMagic()
	}
	t := nftables.MustConcatSetType(l...)
	return t.GetNFTMagic()
}

// keyLen returns the key length in bytes: a single field's size, or the
// padded size of a concatenation.
func (l keyLayout) keyLen() uint32 {
	if len(l) == 1 {
		return l[0].Bytes
	}
	var n uint32
	for _, t := range l {
		n += (t.Bytes + 3) &^ 3
	}
	return n
}

// fields returns the model fields of the layout, defaulting addresses to the
// destination (the kernel does not record which address a set holds; Read
// takes it from the rules that use the set when there are any).
func (l keyLayout) fields() []nft.Field {
	out := make([]nft.Field, len(l))
	for i, t := range l {
		switch t.GetNFTMagic() {
		case nftables.TypeIPAddr.GetNFTMagic(), nftables.TypeIP6Addr.GetNFTMagic():
			out[i] = nft.FieldDaddr
		case nftables.TypeInetProto.GetNFTMagic():
			out[i] = nft.FieldL4Proto
		default:
			out[i] = nft.FieldDport
		}
	}
	return out
}

func (l keyLayout) String() string {
	names := make([]string, len(l))
	for i, t := range l {
		names[i] = t.Name
	}
	return strings.Join(names, " . ")
}

// appendKey appends the encoded key of vals to b.
func (l keyLayout) appendKey(b []byte, vals []nft.Value) ([]byte, error) {
	if len(vals) != len(l) {
		return nil, fmt.Errorf("key of %d values for a key of %d fields (%s)", len(vals), len(l), l)
	}
	for i, t := range l {
		v := vals[i]
		start := len(b)
		switch t.GetNFTMagic() {
		case nftables.TypeIPAddr.GetNFTMagic():
			if !v.Addr.Is4() {
				return nil, fmt.Errorf("key value %d: %v is not an IPv4 address", i, v.Addr)
			}
			a := v.Addr.As4()
			b = append(b, a[:]...)
		case nftables.TypeIP6Addr.GetNFTMagic():
			if !v.Addr.Is6() || v.Addr.Is4In6() {
				return nil, fmt.Errorf("key value %d: %v is not an IPv6 address", i, v.Addr)
			}
			a := v.Addr.As16()
			b = append(b, a[:]...)
		case nftables.TypeInetProto.GetNFTMagic():
			if v.Num > 0xff {
				return nil, fmt.Errorf("key value %d: protocol %d out of range", i, v.Num)
			}
			b = append(b, byte(v.Num))
		default:
			if v.Num > 0xffff {
				return nil, fmt.Errorf("key value %d: port %d out of range", i, v.Num)
			}
			b = binary.BigEndian.AppendUint16(b, uint16(v.Num))
		}
		if len(l) > 1 {
			for (len(b)-start)%4 != 0 {
				b = append(b, 0)
			}
		}
	}
	return b, nil
}

// decodeKey decodes an element key.
func (l keyLayout) decodeKey(b []byte) ([]nft.Value, error) {
	if uint32(len(b)) != l.keyLen() {
		return nil, fmt.Errorf("key of %d bytes, want %d (%s)", len(b), l.keyLen(), l)
	}
	vals := make([]nft.Value, len(l))
	for i, t := range l {
		n := int(t.Bytes)
		switch t.GetNFTMagic() {
		case nftables.TypeIPAddr.GetNFTMagic(), nftables.TypeIP6Addr.GetNFTMagic():
			fam := ipfamily.IPv4
			if n == 16 {
				fam = ipfamily.IPv6
			}
			a, _ := addrFrom(fam, b[:n])
			vals[i] = nft.A(a)
		case nftables.TypeInetProto.GetNFTMagic():
			vals[i] = nft.N(uint32(b[0]))
		default:
			vals[i] = nft.N(uint32(binary.BigEndian.Uint16(b)))
		}
		if len(l) > 1 {
			n = (n + 3) &^ 3
		}
		b = b[n:]
	}
	return vals, nil
}
