package members

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// memNet is an in-memory UDP network: datagrams between memConns by IP, lost
// when the receiver's queue is full, unreachable for addresses nobody holds.
type memNet struct {
	mu    sync.Mutex
	conns map[netip.Addr]*memConn
}

type datagram struct {
	b    []byte
	from *net.UDPAddr
}

var errUnreachable = errors.New("network is unreachable")

func (n *memNet) listen(a netip.Addr) *memConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conns == nil {
		n.conns = map[netip.Addr]*memConn{}
	}
	c := &memConn{net: n, addr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, DefaultPort)), in: make(chan datagram, 64), wake: make(chan struct{}), closed: make(chan struct{})}
	n.conns[a] = c
	return c
}

// memConn is one socket of a memNet. Setting dead drops everything it sends, as
// if its process had been killed.
type memConn struct {
	net    *memNet
	addr   *net.UDPAddr
	in     chan datagram
	dead   atomic.Bool
	closed chan struct{}
	once   sync.Once

	mu       sync.Mutex
	deadline time.Time
	wake     chan struct{} // closed and replaced when the deadline changes
}

func (c *memConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for range 1000 { // bounded: each round ends with a datagram, a close, a deadline, or a deadline change
		c.mu.Lock()
		deadline, wake := c.deadline, c.wake
		c.mu.Unlock()
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return 0, nil, os.ErrDeadlineExceeded
		}
		if n, from, ok, err := c.wait(b, deadline, wake); ok {
			return n, from, err
		}
	}
	return 0, nil, errors.New("memconn: too many deadline changes")
}

// wait blocks for a datagram, a close or the deadline (ok), or a deadline change
// (not ok: look again).
func (c *memConn) wait(b []byte, deadline time.Time, wake <-chan struct{}) (int, net.Addr, bool, error) {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case dg := <-c.in:
		return copy(b, dg.b), dg.from, true, nil
	case <-c.closed:
		return 0, nil, true, net.ErrClosed
	case <-expired:
		return 0, nil, true, os.ErrDeadlineExceeded
	case <-wake:
		return 0, nil, false, nil
	}
}

func (c *memConn) WriteTo(b []byte, to net.Addr) (int, error) {
	if c.dead.Load() {
		return len(b), nil
	}
	ap := to.(*net.UDPAddr).AddrPort()
	c.net.mu.Lock()
	dst := c.net.conns[ap.Addr().Unmap()]
	c.net.mu.Unlock()
	if dst == nil {
		return 0, errUnreachable
	}
	if ap.Port() != uint16(dst.addr.Port) {
		return len(b), nil
	}
	select {
	case dst.in <- datagram{b: append([]byte(nil), b...), from: c.addr}:
	default: // queue full: lost, as UDP is
	}
	return len(b), nil
}

func (c *memConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	close(c.wake)
	c.wake = make(chan struct{})
	return nil
}

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *memConn) LocalAddr() net.Addr              { return c.addr }
func (c *memConn) SetDeadline(t time.Time) error    { return c.SetReadDeadline(t) }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
