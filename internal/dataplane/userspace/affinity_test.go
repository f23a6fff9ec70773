package userspace

import (
	"net"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// pipeListener is a TCP proxy socket in memory: connect makes a pipe, hands
// its far end to Accept with the given client address, and returns the near
// end.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080} }

func (l *pipeListener) connect(from netip.AddrPort) net.Conn {
	near, far := net.Pipe()
	l.conns <- fromConn{Conn: far, from: net.TCPAddrFromAddrPort(from)}
	return near
}

// fromConn is a pipe end that reports a client's address.
type fromConn struct {
	net.Conn
	from net.Addr
}

func (c fromConn) RemoteAddr() net.Addr { return c.from }

// In fake time, through the TCP path: a client stays with its endpoint while
// it comes back within the affinity timeout, and moves on after it; another
// client is not pinned by it.
func TestTCPAffinityExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newPipeListener()
		eps := &pipeEndpoints{}
		p := New(Config{
			Listen:    map[ipfamily.Family]netip.Addr{ipfamily.IPv4: loopback},
			Dial:      eps.dial,
			ListenTCP: func(string, string) (net.Listener, error) { return l, nil },
		})
		sp := entry("default/web:http/tcp", model.ProtocolTCP, epA, epB, epC)
		sp.AffinityTimeout = 10 * time.Second
		if err := p.Update([]*servicetable.ServicePort{sp}); err != nil {
			t.Fatal(err)
		}
		request := func(client string) string {
			t.Helper()
			c := l.connect(netip.MustParseAddrPort(client))
			defer c.Close()
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 100)
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			return string(buf[:n])
		}
		want := epA.String() + " ping"
		if got := request("192.0.2.1:1000"); got != want {
			t.Fatalf("first request: %q, want %q", got, want)
		}
		for i := range 3 {
			time.Sleep(9 * time.Second)
			if got := request("192.0.2.1:1001"); got != want {
				t.Fatalf("request %d after 9s: %q, want %q (affinity)", i, got, want)
			}
		}
		if got := request("192.0.2.2:1000"); got != epB.String()+" ping" {
			t.Errorf("other client: %q, want the next endpoint", got)
		}
		time.Sleep(10 * time.Second)
		if got := request("192.0.2.1:1002"); got != epC.String()+" ping" {
			t.Errorf("after the timeout: %q, want the next endpoint in turn", got)
		}
		p.Close()
		eps.wg.Wait()
		if st := p.Stats(); st.Connections != 6 {
			t.Errorf("stats %+v, want 6 connections", st)
		}
	})
}
