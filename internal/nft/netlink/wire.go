package netlink

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Netlink framing, written by hand: the batch of a 10k-service table is tens
// of thousands of messages, so it is built into one growing buffer with no
// per-attribute allocation (see batch.go).

const (
	nlmsgHdrLen = unix.NLMSG_HDRLEN // 16
	nfgenLen    = 4                 // struct nfgenmsg
	attrHdrLen  = 4                 // struct nlattr
	nlaNested   = unix.NLA_F_NESTED
	nlaTypeMask = 0x3fff // ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER)
	// maxAttrLen is the largest nested attribute (its length is a u16).
	maxAttrLen = 0xffff
)

func align4(n int) int { return (n + 3) &^ 3 }

// enc appends netlink messages and attributes to one buffer.
type enc struct {
	b []byte
}

// msg starts a message of nf_tables type t and returns its offset for end.
func (e *enc) msg(t uint16, flags uint16, seq uint32, family uint8) int {
	off := len(e.b)
	e.b = binary.NativeEndian.AppendUint32(e.b, 0) // length, patched by end
	e.b = binary.NativeEndian.AppendUint16(e.b, unix.NFNL_SUBSYS_NFTABLES<<8|t)
	e.b = binary.NativeEndian.AppendUint16(e.b, flags)
	e.b = binary.NativeEndian.AppendUint32(e.b, seq)
	e.b = binary.NativeEndian.AppendUint32(e.b, 0) // port id: the kernel
	e.b = append(e.b, family, unix.NFNETLINK_V0, 0, 0)
	return off
}

// rawMsg starts a message with a raw netlink type (batch begin/end).
func (e *enc) rawMsg(t uint16, seq uint32, resID uint16) {
	off := len(e.b)
	e.b = binary.NativeEndian.AppendUint32(e.b, 0)
	e.b = binary.NativeEndian.AppendUint16(e.b, t)
	e.b = binary.NativeEndian.AppendUint16(e.b, unix.NLM_F_REQUEST)
	e.b = binary.NativeEndian.AppendUint32(e.b, seq)
	e.b = binary.NativeEndian.AppendUint32(e.b, 0)
	e.b = append(e.b, unix.AF_UNSPEC, unix.NFNETLINK_V0)
	e.b = binary.BigEndian.AppendUint16(e.b, resID)
	e.end(off)
}

// end patches the length of the message started at off.
func (e *enc) end(off int) {
	binary.NativeEndian.PutUint32(e.b[off:], uint32(len(e.b)-off))
}

func (e *enc) attr(t uint16, data []byte) {
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(attrHdrLen+len(data)))
	e.b = binary.NativeEndian.AppendUint16(e.b, t)
	e.b = append(e.b, data...)
	e.pad()
}

func (e *enc) pad() {
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// str appends a NUL-terminated string attribute.
func (e *enc) str(t uint16, s string) {
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(attrHdrLen+len(s)+1))
	e.b = binary.NativeEndian.AppendUint16(e.b, t)
	e.b = append(e.b, s...)
	e.b = append(e.b, 0)
	e.pad()
}

func (e *enc) u32(t uint16, v uint32) {
	e.b = binary.NativeEndian.AppendUint16(e.b, attrHdrLen+4)
	e.b = binary.NativeEndian.AppendUint16(e.b, t)
	e.b = binary.BigEndian.AppendUint32(e.b, v)
}

func (e *enc) u64(t uint16, v uint64) {
	e.b = binary.NativeEndian.AppendUint16(e.b, attrHdrLen+8)
	e.b = binary.NativeEndian.AppendUint16(e.b, t)
	e.b = binary.BigEndian.AppendUint64(e.b, v)
}

// nest starts a nested attribute; close it with endNest.
func (e *enc) nest(t uint16) int {
	off := len(e.b)
	e.b = binary.NativeEndian.AppendUint16(e.b, 0)
	e.b = binary.NativeEndian.AppendUint16(e.b, t|nlaNested)
	return off
}

// endNest patches the nested attribute's length; it fails when the content
// does not fit the u16 length.
func (e *enc) endNest(off int) error {
	n := len(e.b) - off
	if n > maxAttrLen {
		return fmt.Errorf("nested attribute of %d bytes exceeds %d", n, maxAttrLen)
	}
	binary.NativeEndian.PutUint16(e.b[off:], uint16(n))
	return nil
}

// attrs iterates over the attributes in b.
type attrs struct {
	b   []byte
	typ uint16
	val []byte
	err error
}

func newAttrs(b []byte) *attrs { return &attrs{b: b} }

// next advances to the next attribute; false at the end or on malformed input
// (then err is set).
func (a *attrs) next() bool {
	if len(a.b) == 0 {
		return false
	}
	if len(a.b) < attrHdrLen {
		a.err = errors.New("truncated attribute header")
		return false
	}
	n := int(binary.NativeEndian.Uint16(a.b))
	if n < attrHdrLen || n > len(a.b) {
		a.err = fmt.Errorf("attribute length %d out of range (%d left)", n, len(a.b))
		return false
	}
	a.typ = binary.NativeEndian.Uint16(a.b[2:]) & nlaTypeMask
	a.val = a.b[attrHdrLen:n]
	if m := align4(n); m < len(a.b) {
		a.b = a.b[m:]
	} else {
		a.b = nil
	}
	return true
}

func (a *attrs) u32() uint32 {
	if len(a.val) < 4 {
		a.err = fmt.Errorf("attribute %d: %d bytes, want 4", a.typ, len(a.val))
		return 0
	}
	return binary.BigEndian.Uint32(a.val)
}

func (a *attrs) u64() uint64 {
	if len(a.val) < 8 {
		a.err = fmt.Errorf("attribute %d: %d bytes, want 8", a.typ, len(a.val))
		return 0
	}
	return binary.BigEndian.Uint64(a.val)
}

func (a *attrs) str() string {
	v := a.val
	for i, c := range v {
		if c == 0 {
			v = v[:i]
			break
		}
	}
	return string(v)
}

// nlMsg is one received netlink message.
type nlMsg struct {
	typ   uint16
	flags uint16
	seq   uint32
	data  []byte // after the netlink header
}

// parseMsgs splits a datagram into messages.
func parseMsgs(b []byte, out []nlMsg) ([]nlMsg, error) {
	for len(b) >= nlmsgHdrLen {
		n := int(binary.NativeEndian.Uint32(b))
		if n < nlmsgHdrLen || n > len(b) {
			return out, fmt.Errorf("netlink message length %d out of range (%d left)", n, len(b))
		}
		out = append(out, nlMsg{
			typ:   binary.NativeEndian.Uint16(b[4:]),
			flags: binary.NativeEndian.Uint16(b[6:]),
			seq:   binary.NativeEndian.Uint32(b[8:]),
			data:  b[nlmsgHdrLen:n],
		})
		if m := align4(n); m < len(b) {
			b = b[m:]
		} else {
			b = nil
		}
	}
	return out, nil
}

// nlError decodes an NLMSG_ERROR payload: the errno (0 for an ack), the
// sequence number of the message it answers, and the extended ack text.
func nlError(m nlMsg) (errno unix.Errno, seq uint32, text string) {
	if len(m.data) < 4+nlmsgHdrLen {
		return unix.EIO, 0, "short netlink error message"
	}
	code := int32(binary.NativeEndian.Uint32(m.data))
	seq = binary.NativeEndian.Uint32(m.data[4+8:])
	if code < 0 {
		errno = unix.Errno(-code)
	}
	if m.flags&unix.NLM_F_ACK_TLVS == 0 {
		return errno, seq, ""
	}
	// With NETLINK_CAP_ACK the original message is reduced to its header.
	off := 4 + nlmsgHdrLen
	if m.flags&unix.NLM_F_CAPPED == 0 {
		off = 4 + int(binary.NativeEndian.Uint32(m.data[4:]))
		off = align4(off)
	}
	if off > len(m.data) {
		return errno, seq, ""
	}
	a := newAttrs(m.data[off:])
	for a.next() {
		if a.typ == unix.NLMSGERR_ATTR_MSG {
			text = a.str()
		}
	}
	return errno, seq, text
}

func nativeU32(b []byte) uint32       { return binary.NativeEndian.Uint32(b) }
func putNativeU32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }
