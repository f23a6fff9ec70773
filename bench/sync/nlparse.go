package syncbench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// ElemEvent is one NFT_MSG_NEWSETELEM notification: elements added to a set or
// map. Keys hold the raw key of each element (for a concatenation, every field
// padded to 4 bytes, the first field first).
type ElemEvent struct {
	Family uint8 // unix.NFPROTO_IPV4 or unix.NFPROTO_IPV6 (the table's family)
	Table  string
	Set    string
	Keys   [][]byte
}

// Addrs returns the leading address field of each key: 4 bytes for an ip
// table, 16 for an ip6 one. Keys too short for an address are skipped.
func (e ElemEvent) Addrs() []netip.Addr {
	n := 4
	if e.Family == unix.NFPROTO_IPV6 {
		n = 16
	}
	var out []netip.Addr
	for _, k := range e.Keys {
		if len(k) < n {
			continue
		}
		a, _ := netip.AddrFromSlice(k[:n])
		out = append(out, a)
	}
	return out
}

const (
	nlmsgHdrLen  = 16
	nfgenHdrLen  = 4
	nlaHdrLen    = 4
	nlaTypeMask  = 0x3fff // without NLA_F_NESTED and NLA_F_NET_BYTEORDER
	newSetElemTy = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWSETELEM
	newRuleTy    = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE
)

var errShort = errors.New("truncated netlink data")

func align4(n int) int { return (n + 3) &^ 3 }

// parseDatagram walks the netlink messages of one datagram and calls onElem
// for each NEWSETELEM notification and onRule for each NEWRULE one (a nil
// callback skips its kind unparsed). Other messages are skipped. It returns an
// error for malformed data (what was parsed before it was delivered).
func parseDatagram(b []byte, onElem func(ElemEvent), onRule func(RuleEvent)) error {
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := binary.NativeEndian.Uint16(b[4:6])
		if l < nlmsgHdrLen || l > len(b) {
			return fmt.Errorf("netlink message length %d of %d bytes: %w", l, len(b), errShort)
		}
		switch {
		case typ == newSetElemTy && onElem != nil:
			ev, err := parseNewSetElem(b[nlmsgHdrLen:l])
			if err != nil {
				return fmt.Errorf("newsetelem: %w", err)
			}
			onElem(ev)
		case typ == newRuleTy && onRule != nil:
			ev, err := parseNewRule(b[nlmsgHdrLen:l])
			if err != nil {
				return fmt.Errorf("newrule: %w", err)
			}
			onRule(ev)
		}
		if align4(l) >= len(b) {
			return nil
		}
		b = b[align4(l):]
	}
	return nil
}

// parseNewSetElem parses the payload of a NEWSETELEM message: nfgenmsg, then
// NFTA_SET_ELEM_LIST_* attributes.
func parseNewSetElem(b []byte) (ElemEvent, error) {
	var ev ElemEvent
	if len(b) < nfgenHdrLen {
		return ev, errShort
	}
	ev.Family = b[0]
	err := walkAttrs(b[nfgenHdrLen:], func(typ uint16, v []byte) error {
		switch typ {
		case unix.NFTA_SET_ELEM_LIST_TABLE:
			ev.Table = cString(v)
		case unix.NFTA_SET_ELEM_LIST_SET:
			ev.Set = cString(v)
		case unix.NFTA_SET_ELEM_LIST_ELEMENTS:
			return walkAttrs(v, func(typ uint16, elem []byte) error {
				if typ != unix.NFTA_LIST_ELEM {
					return nil
				}
				k, err := elemKey(elem)
				if err != nil {
					return err
				}
				if k != nil {
					ev.Keys = append(ev.Keys, k)
				}
				return nil
			})
		}
		return nil
	})
	return ev, err
}

// elemKey returns NFTA_SET_ELEM_KEY / NFTA_DATA_VALUE of one element (nil when
// absent).
func elemKey(elem []byte) ([]byte, error) {
	var key []byte
	err := walkAttrs(elem, func(typ uint16, v []byte) error {
		if typ != unix.NFTA_SET_ELEM_KEY {
			return nil
		}
		return walkAttrs(v, func(typ uint16, d []byte) error {
			if typ == unix.NFTA_DATA_VALUE {
				key = append([]byte(nil), d...)
			}
			return nil
		})
	})
	return key, err
}

// walkAttrs calls fn for each netlink attribute in b, with the type stripped of
// its flag bits.
func walkAttrs(b []byte, fn func(typ uint16, v []byte) error) error {
	for len(b) >= nlaHdrLen {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
		if l < nlaHdrLen || l > len(b) {
			return fmt.Errorf("attribute length %d of %d bytes: %w", l, len(b), errShort)
		}
		if err := fn(typ, b[nlaHdrLen:l]); err != nil {
			return err
		}
		if align4(l) >= len(b) {
			return nil
		}
		b = b[align4(l):]
	}
	return nil
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
