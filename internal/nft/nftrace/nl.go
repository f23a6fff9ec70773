package nftrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// Hand-written netlink framing for the two raw exchanges of this package: the
// trace multicast subscription (listen.go) and the rule-handle dump
// (handles.go). Building tables goes through github.com/google/nftables.

const (
	nlHdrLen    = unix.NLMSG_HDRLEN // 16
	nfgenLen    = 4                 // struct nfgenmsg
	attrHdrLen  = 4                 // struct nlattr
	nlaTypeMask = 0x3fff            // ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER)

	// rcvBuf is the receive buffer of a trace listener: a traced TCP
	// handshake through a svcnet table is a few dozen events of ~250 bytes.
	rcvBuf = 8 << 20
	// readBuf is the user buffer of one recvmsg.
	readBuf = 64 << 10
	// exchangeTimeout bounds one request/dump exchange.
	exchangeTimeout = 10 * time.Second
	// maxDumpMsgs bounds the messages read for one dump.
	maxDumpMsgs = 1 << 20
)

func align4(n int) int { return (n + 3) &^ 3 }

// attr is one netlink attribute: its type without the nested/byte-order
// flags, and its payload.
type attr struct {
	typ  uint16
	data []byte
}

// parseAttrs splits b into attributes; a truncated attribute is an error.
func parseAttrs(b []byte) ([]attr, error) {
	var out []attr
	for len(b) >= attrHdrLen {
		n := int(binary.NativeEndian.Uint16(b))
		if n < attrHdrLen || n > len(b) {
			return out, fmt.Errorf("netlink attribute: length %d of %d bytes left", n, len(b))
		}
		out = append(out, attr{typ: binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask, data: b[attrHdrLen:n]})
		b = b[min(align4(n), len(b)):]
	}
	return out, nil
}

// appendAttr appends one attribute to b.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(attrHdrLen+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// cstring returns a NUL-terminated copy of s as an attribute payload.
func cstring(s string) []byte { return append([]byte(s), 0) }

// gostring returns a NUL-terminated attribute payload as a string.
func gostring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// nlMsg is one received netlink message.
type nlMsg struct {
	typ   uint16
	flags uint16
	seq   uint32
	data  []byte // after the netlink header
}

// splitMsgs splits one datagram into messages.
func splitMsgs(b []byte) ([]nlMsg, error) {
	var out []nlMsg
	for len(b) >= nlHdrLen {
		n := int(binary.NativeEndian.Uint32(b))
		if n < nlHdrLen || n > len(b) {
			return out, fmt.Errorf("netlink message: length %d of %d bytes left", n, len(b))
		}
		out = append(out, nlMsg{
			typ:   binary.NativeEndian.Uint16(b[4:]),
			flags: binary.NativeEndian.Uint16(b[6:]),
			seq:   binary.NativeEndian.Uint32(b[8:]),
			data:  b[nlHdrLen:n],
		})
		b = b[min(align4(n), len(b)):]
	}
	return out, nil
}

// errnoOf returns the error of an NLMSG_ERROR message (nil for an ack).
func errnoOf(m nlMsg) error {
	if len(m.data) < 4 {
		return errors.New("netlink: truncated error message")
	}
	if code := int32(binary.NativeEndian.Uint32(m.data)); code != 0 {
		return unix.Errno(-code)
	}
	return nil
}

// openNetfilter opens a NETLINK_NETFILTER socket inside ns (the socket keeps
// that namespace whatever thread uses it later) and binds it.
func openNetfilter(ns *netns.NS) (int, error) {
	if ns == nil {
		return -1, errors.New("no network namespace given")
	}
	fd := -1
	err := ns.Do(func() error {
		s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		fd = s
		return nil
	})
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("netlink bind: %w", err)
	}
	return fd, nil
}

// nftRequest builds one nf_tables request message.
func nftRequest(msgType uint16, flags uint16, seq uint32, family uint8, attrs []byte) []byte {
	b := make([]byte, 0, nlHdrLen+nfgenLen+len(attrs))
	b = binary.NativeEndian.AppendUint32(b, uint32(nlHdrLen+nfgenLen+len(attrs)))
	b = binary.NativeEndian.AppendUint16(b, unix.NFNL_SUBSYS_NFTABLES<<8|msgType)
	b = binary.NativeEndian.AppendUint16(b, unix.NLM_F_REQUEST|flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, family, unix.NFNETLINK_V0, 0, 0)
	return append(b, attrs...)
}

// errDumpInterrupted reports a dump the kernel marked inconsistent (the
// ruleset changed while it was read).
var errDumpInterrupted = errors.New("netlink dump interrupted by a ruleset change")

// exchange sends one request on a fresh socket in ns and returns the nf_tables
// payloads (after the nfgenmsg header) of the answer: all messages of a dump
// up to NLMSG_DONE, or the reply of a request sent with NLM_F_ACK up to its
// ack. A kernel error is returned as its unix.Errno.
func exchange(ns *netns.NS, req []byte, dump bool) ([]nlMsg, error) {
	fd, err := openNetfilter(ns)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(exchangeTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("netlink receive timeout: %w", err)
	}
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("netlink send: %w", err)
	}
	seq := binary.NativeEndian.Uint32(req[8:])
	buf := make([]byte, readBuf)
	var out []nlMsg
	intr := false
	deadline := time.Now().Add(exchangeTimeout)
	for n := 0; n < maxDumpMsgs && time.Now().Before(deadline); {
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("netlink receive: %w", err)
		}
		msgs, err := splitMsgs(buf[:k])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			n++
			if m.seq != seq {
				continue
			}
			if m.flags&unix.NLM_F_DUMP_INTR != 0 {
				intr = true
			}
			switch m.typ {
			case unix.NLMSG_ERROR:
				if err := errnoOf(m); err != nil || !dump {
					return out, err
				}
			case unix.NLMSG_DONE:
				if intr {
					return nil, errDumpInterrupted
				}
				return out, nil
			default:
				if len(m.data) < nfgenLen {
					return nil, errors.New("netlink: truncated nf_tables message")
				}
				// Copy: buf is reused by the next receive.
				m.data = append([]byte(nil), m.data...)
				out = append(out, m)
			}
		}
	}
	return nil, errors.New("netlink exchange: no end of answer within bounds")
}
