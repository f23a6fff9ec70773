package netlink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
)

const (
	// rcvBuf is the socket receive buffer: room for the errors of a large
	// failed batch and for dump datagrams.
	rcvBuf = 8 << 20
	// readBuf is the user buffer of one recvmsg; the kernel sends dumps in
	// datagrams of at most 32 KiB.
	readBuf = 64 << 10
	// defaultTimeout bounds one kernel exchange when ctx has no deadline.
	defaultTimeout = time.Minute
)

// Conn is a netlink connection to nf_tables in one network namespace. It
// implements nft.Conn.
//
// Contract: a Conn is safe for concurrent use; its operations are serialised
// on one lasting socket. A kernel exchange is bounded by the context's
// deadline (or one minute) but a blocked receive is not interrupted by
// cancellation. After an exchange that did not end cleanly (timeout, an
// interrupted or abandoned dump) the next operation reopens the socket, so a
// Conn never reads stale answers. Close releases it.
type Conn struct {
	mu sync.Mutex
	ns *netns.NS // for reopening; nil: the namespace of the opening thread
	sock
	broken bool // the socket may hold the rest of an abandoned exchange
	until  time.Time
	seq    uint32
	sndBuf int
	b      builder
	// lastBatch is the size in bytes of the last batch sent.
	lastBatch int
	// keys caches set key layouts (table → set → layout) for encoding the
	// elements of sets that the current batch did not define. Apply drops
	// the tables of a failed batch and updates those of a committed one.
	keys map[tableID]map[string]keyLayout
}

type tableID struct {
	fam  ipfamily.Family
	name string
}

var _ nft.Conn = (*Conn)(nil)

// New returns a connection to nf_tables in the network namespace ns, or in
// the calling thread's namespace when no ns is given (at most one may be).
// The Conn keeps its own handle on the namespace; ns may be closed afterwards.
func New(ns ...*netns.NS) (*Conn, error) {
	if len(ns) > 1 {
		return nil, fmt.Errorf("nftables netlink: %d namespaces given, want at most one", len(ns))
	}
	c := &Conn{sock: sock{fd: -1, rbuf: make([]byte, readBuf)}, keys: map[tableID]map[string]keyLayout{}}
	path, inNS := "/proc/thread-self/ns/net", false
	if len(ns) == 1 && ns[0] != nil {
		path, inNS = ns[0].Path(), true
	}
	own, err := netns.OpenPath(path)
	if err != nil {
		return nil, fmt.Errorf("nftables netlink: %w", err)
	}
	c.ns = own
	// Without ns the socket is made on the calling thread; the handle then
	// only serves reopening.
	if err := c.socket(inNS); err != nil {
		own.Close()
		return nil, err
	}
	return c, nil
}

// socket opens, binds and configures the netlink socket, inside c.ns when
// inNS is set.
func (c *Conn) socket(inNS bool) error {
	var ns *netns.NS
	if inNS {
		ns = c.ns
	}
	fd, err := openSocket(ns)
	if err != nil {
		return fmt.Errorf("nftables netlink socket: %w", err)
	}
	// Extended acks carry the kernel's error text; capped acks do not echo
	// the failed message back.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	_ = setRcvBuf(fd, rcvBuf)
	c.fd, c.sndBuf, c.broken = fd, 0, false
	return nil
}

// openSocket opens a NETLINK_NETFILTER socket inside ns (the calling
// thread's namespace when ns is nil; the socket keeps its namespace whatever
// thread uses it later) and binds it.
func openSocket(ns *netns.NS) (int, error) {
	var fd int
	mk := func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	}
	var err error
	if ns != nil {
		err = ns.Do(mk)
	} else {
		err = mk()
	}
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind: %w", err)
	}
	return fd, nil
}

// setRcvBuf sets the socket receive buffer to n bytes: SO_RCVBUFFORCE passes
// rmem_max (it needs CAP_NET_ADMIN, which nf_tables needs anyway), SO_RCVBUF
// is the fallback.
func setRcvBuf(fd, n int) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n); err != nil {
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n)
	}
	return nil
}

// ready checks the connection before an operation, reopening a broken socket.
func (c *Conn) ready() error {
	if c.ns == nil {
		return errClosed
	}
	if !c.broken {
		return nil
	}
	unix.Close(c.fd)
	c.fd = -1
	return c.socket(true)
}

// Close releases the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ns == nil {
		return nil
	}
	var err error
	if c.fd >= 0 {
		err = unix.Close(c.fd)
	}
	c.ns.Close()
	c.fd, c.ns = -1, nil
	return err
}

var errClosed = errors.New("connection closed")

// nextSeq reserves n sequence numbers and returns the first.
func (c *Conn) nextSeq(n int) uint32 {
	first := c.seq + 1
	c.seq += uint32(n)
	return first
}

// deadline starts an exchange: it sets the time limit from ctx and the
// socket receive timeout to match.
func (c *Conn) deadline(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := defaultTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
		if d <= 0 {
			return context.DeadlineExceeded
		}
	}
	c.until = time.Now().Add(d)
	tv := unix.NsecToTimeval(d.Nanoseconds())
	if tv.Sec == 0 && tv.Usec == 0 {
		tv.Usec = 1
	}
	return unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

// send writes one datagram to the kernel, growing the send buffer first when
// the datagram would not fit (a large batch is one datagram).
func (c *Conn) send(b []byte) error {
	if need := len(b) + 64<<10; need > c.sndBuf {
		// The kernel doubles the value; SO_SNDBUFFORCE needs CAP_NET_ADMIN,
		// which writing nf_tables needs anyway.
		if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, need); err != nil {
			if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUF, need); err != nil {
				return fmt.Errorf("send buffer of %d bytes: %w", need, err)
			}
		}
		c.sndBuf = need
	}
	for {
		err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err == unix.EINTR {
			continue
		}
		return err
	}
}

// sock is a netlink socket with its receive buffer.
type sock struct {
	fd   int
	rbuf []byte
	msgs []nlMsg
}

// recv reads one datagram from the kernel and returns its messages (valid
// until the next recv); datagrams from other senders are skipped. With
// nonblock it returns (nil, nil) when nothing is queued. A receive queue
// overflow is returned as unix.ENOBUFS.
func (s *sock) recv(nonblock bool) ([]nlMsg, error) {
	flags := 0
	if nonblock {
		flags = unix.MSG_DONTWAIT
	}
	for {
		n, _, rflags, from, err := unix.Recvmsg(s.fd, s.rbuf, nil, flags)
		switch {
		case err == unix.EINTR:
			continue
		case nonblock && (err == unix.EAGAIN || err == unix.EWOULDBLOCK):
			return nil, nil
		case err == unix.EAGAIN || err == unix.EWOULDBLOCK:
			return nil, fmt.Errorf("no answer from the kernel: %w", context.DeadlineExceeded)
		case err != nil:
			return nil, err
		}
		if sa, ok := from.(*unix.SockaddrNetlink); ok && sa.Pid != 0 {
			continue // not from the kernel
		}
		if rflags&unix.MSG_TRUNC != 0 {
			return nil, fmt.Errorf("netlink datagram truncated to %d bytes", n)
		}
		s.msgs, err = parseMsgs(s.rbuf[:n], s.msgs[:0])
		return s.msgs, err
	}
}

// request sends one non-batch request (family fam, attributes from fill) and
// calls fn for each answer message until the exchange ends: NLMSG_DONE for a
// dump, the acknowledgement otherwise. A netlink error answer is returned as a
// unix.Errno (with the kernel's text, if any).
func (c *Conn) request(ctx context.Context, typ uint16, flags uint16, fam uint8, fill func(e *enc), fn func(m nlMsg) error) error {
	return c.requestOther(ctx, typ, flags, fam, fill, fn, nil)
}

// requestOther is request; other, when set, sees every message that does not
// belong to this exchange.
func (c *Conn) requestOther(ctx context.Context, typ uint16, flags uint16, fam uint8, fill func(e *enc), fn func(m nlMsg) error, other func(nlMsg)) (err error) {
	if err := c.ready(); err != nil {
		return err
	}
	if err := c.deadline(ctx); err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			c.broken = true // the rest of the answer may still come
		}
	}()
	seq := c.nextSeq(1)
	dump := flags&unix.NLM_F_DUMP != 0
	if !dump {
		flags |= unix.NLM_F_ACK
	}
	var e enc
	off := e.msg(typ, unix.NLM_F_REQUEST|flags, seq, fam)
	if fill != nil {
		fill(&e)
	}
	e.end(off)
	if err := c.send(e.b); err != nil {
		return err
	}
	for {
		if time.Now().After(c.until) {
			return fmt.Errorf("no end of answer from the kernel: %w", context.DeadlineExceeded)
		}
		msgs, err := c.recv(false)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.seq != seq {
				if other != nil {
					other(m)
				}
				continue // else a stale answer to an abandoned exchange
			}
			end, err := answer(m, dump, fn)
			if end {
				done = true
			}
			if end || err != nil {
				return err
			}
		}
	}
}

// answer handles one message of an exchange (a dump when dump is set): it
// passes data messages to fn and reports whether the message ends the
// exchange, and the exchange's error. A dump ends with NLMSG_DONE or an error;
// a request with its acknowledgement or error. A message flagged
// NLM_F_DUMP_INTR (the kernel's ruleset changed between two parts of the
// dump; the flag may come on NLMSG_DONE alone) fails the dump with
// errDumpInterrupted; the data already passed to fn is then inconsistent.
func answer(m nlMsg, dump bool, fn func(m nlMsg) error) (end bool, err error) {
	switch m.typ {
	case unix.NLMSG_DONE:
		if len(m.data) >= 4 {
			if code := int32(binary.NativeEndian.Uint32(m.data)); code < 0 {
				return true, unix.Errno(-code)
			}
		}
		if m.flags&unix.NLM_F_DUMP_INTR != 0 {
			return true, errDumpInterrupted
		}
		return true, nil
	case unix.NLMSG_ERROR:
		errno, _, text := nlError(m)
		if errno != 0 {
			return true, kernelError(errno, text)
		}
		return !dump, nil // a dump's acknowledgement does not end it
	}
	if m.flags&unix.NLM_F_DUMP_INTR != 0 {
		return false, errDumpInterrupted
	}
	return false, fn(m)
}

var errDumpInterrupted = errors.New("dump interrupted by a concurrent change")

func kernelError(errno unix.Errno, text string) error {
	if text == "" {
		return errno
	}
	return fmt.Errorf("%w (%s)", errno, text)
}
