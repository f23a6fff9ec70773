package echo

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// serveTCP sniffs c's first bytes and either hands it to the HTTP server or
// runs the line protocol on it. c is closed when ctx ends.
func (s *server) serveTCP(ctx context.Context, c net.Conn, httpConns *connListener) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	r := bufio.NewReaderSize(c, 4096)
	v := sniff(c, r)
	mode := "lines"
	if v == IsHTTP {
		mode = "http"
	}
	s.log.V(1).Info("connection", "proto", "tcp", "mode", mode, "client", c.RemoteAddr().String(), "server", c.LocalAddr().String())
	if v == IsHTTP {
		// The HTTP server owns c from here (it closes it on shutdown).
		stop()
		if !httpConns.deliver(ctx, &sniffedConn{Conn: c, r: r}) {
			c.Close()
		}
		return
	}
	defer stop()
	defer c.Close()
	s.serveLines(c, r)
}

// sniff reads c's first bytes into r until Sniff decides. The first byte is
// awaited without limit; the rest of a method token for SniffTimeout. It peeks
// at most 8 bytes: no proper prefix of a method token is longer than 7.
func sniff(c net.Conn, r *bufio.Reader) Verdict {
	defer c.SetReadDeadline(time.Time{})
	for n := 1; n <= 8; n++ {
		b, err := r.Peek(n)
		if err != nil {
			return IsLines // EOF, timeout or a closed conn: no request to serve
		}
		if v := Sniff(b); v != NeedMore {
			return v
		}
		if n == 1 {
			_ = c.SetReadDeadline(time.Now().Add(SniffTimeout))
		}
	}
	return IsLines
}

// serveLines runs the line protocol (Lines) on c until the client's EOF or an
// error, reading through r, which holds what sniff buffered.
func (s *server) serveLines(c net.Conn, r *bufio.Reader) {
	p := Peer{Name: s.cfg.Name, Client: c.RemoteAddr().String(), Node: s.cfg.Node, PodIP: addrString(s.cfg), Server: c.LocalAddr().String()}
	buf := make([]byte, 32<<10)
	var held []byte
	for {
		if len(held) > 0 {
			_ = c.SetReadDeadline(time.Now().Add(HoldTimeout))
		} else {
			_ = c.SetReadDeadline(time.Time{})
		}
		n, err := r.Read(buf)
		timeout := errors.Is(err, os.ErrDeadlineExceeded)
		final := err != nil && (timeout || errors.Is(err, io.EOF))
		if err != nil && !final {
			return
		}
		out, rest := Lines(append(held, buf[:n]...), p, final)
		held = rest
		if len(out) > 0 {
			if _, werr := c.Write(out); werr != nil {
				return
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
	}
}

// sniffedConn is a connection whose first bytes sit in r.
type sniffedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *sniffedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// connListener is the HTTP server's listener: it yields the connections the
// TCP ports sniffed as HTTP.
type connListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newConnListener(ls []net.Listener) *connListener {
	var addr net.Addr = &net.TCPAddr{}
	if len(ls) > 0 {
		addr = ls[0].Addr()
	}
	return &connListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// deliver passes c to Accept; false if the listener or ctx ended first.
func (l *connListener) deliver(ctx context.Context, c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	case <-ctx.Done():
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }
