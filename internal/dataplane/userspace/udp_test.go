package userspace

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// UDP through real sockets: a client's datagrams share one session (one
// endpoint); another client gets the next endpoint; replies come from the
// proxy port.
func TestUDPSessions(t *testing.T) {
	a, b := startBackend(t, "pod-a"), startBackend(t, "pod-b")
	p := newProxy(t, Config{UDPIdleTimeout: time.Minute})
	sp := entry("default/dns:dns/udp", model.ProtocolUDP, a.udp, b.udp)
	addr := mustUpdate(t, p, sp)[0]
	u := p.port(Key{ID: sp.ID, Family: ipfamily.IPv4}).udp

	c1, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	ask := func(c net.Conn, msg string) string {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1500)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("no reply to %q: %v", msg, err)
		}
		return string(buf[:n])
	}
	first := ask(c1, "hostname")
	for range 3 {
		if got := ask(c1, "hostname"); got != first {
			t.Fatalf("same client reached %s then %s", first, got)
		}
	}
	if got := ask(c1, "echo hi"); got != "hi" {
		t.Errorf("echo through the session = %q", got)
	}
	if n := u.sessionCount(); n != 1 {
		t.Errorf("%d sessions after one client, want 1", n)
	}
	other, err := echo.UDP(testCtx(t), nil, addr, "hostname")
	if err != nil {
		t.Fatal(err)
	}
	if other == first {
		t.Errorf("second client reached %s too, want the other pod", other)
	}
	if n := u.sessionCount(); n != 2 {
		t.Errorf("%d sessions after two clients, want 2", n)
	}
	// No endpoint: datagrams are dropped, no session opens.
	mustUpdate(t, p, entry(sp.ID, model.ProtocolUDP))
	c3, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	_ = c3.SetDeadline(time.Now().Add(300 * time.Millisecond))
	_, _ = c3.Write([]byte("hostname"))
	if n, err := c3.Read(make([]byte, 100)); err == nil {
		t.Errorf("reply of %d bytes from a Service without endpoints", n)
	}
	if n := u.sessionCount(); n != 2 {
		t.Errorf("%d sessions, want the 2 open ones", n)
	}
}

// An endpoint whose UDP port is closed answers with ICMP port unreachable:
// the session ends and unpins the client, and the client's next try reaches
// a live pod, which it then sticks to.
func TestUDPRefusedEndpoint(t *testing.T) {
	// The dead endpoint sorts before pod-a, so it is picked first: a free
	// (closed) UDP port on 127.0.0.1, pod-a on 127.0.0.2.
	a := startBackendAt(t, "pod-a", "127.0.0.2")
	c0, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := addrPortOf(c0.LocalAddr())
	c0.Close()
	p := newProxy(t, Config{UDPIdleTimeout: time.Minute})
	sp := entry("default/dns:dns/udp", model.ProtocolUDP, dead, a.udp)
	sp.AffinityTimeout = time.Hour
	addr := mustUpdate(t, p, sp)[0]
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	answered := 0
	for try := 0; try < 20 && answered < 4; try++ {
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write([]byte("hostname")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		n, err := c.Read(buf)
		if err != nil {
			if answered > 0 {
				t.Fatalf("try %d: no answer after the session moved to pod-a: %v", try, err)
			}
			continue
		}
		if got := string(buf[:n]); got != "pod-a" {
			t.Fatalf("answer %q", got)
		}
		answered++
	}
	if answered < 4 {
		t.Fatalf("%d answers in 20 tries, want 4", answered)
	}
	if st := p.Stats(); st.UDPSessions != 2 {
		t.Errorf("stats %+v, want 2 sessions (the dead pod's, then pod-a's)", st)
	}
}

// datagram is one UDP message of the fake network.
type datagram struct {
	from net.Addr
	data string
}

// fakePacketConn is a UDP proxy socket in memory: the test sends into in
// and reads the proxy's replies from out.
type fakePacketConn struct {
	in     chan datagram
	out    chan datagram
	closed chan struct{}
	once   sync.Once
}

func newFakePacketConn() *fakePacketConn {
	return &fakePacketConn{in: make(chan datagram), out: make(chan datagram, 16), closed: make(chan struct{})}
}

func (f *fakePacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case d := <-f.in:
		return copy(b, d.data), d.from, nil
	case <-f.closed:
		return 0, nil, net.ErrClosed
	}
}

func (f *fakePacketConn) WriteTo(b []byte, to net.Addr) (int, error) {
	select {
	case f.out <- datagram{from: to, data: string(b)}:
		return len(b), nil
	case <-f.closed:
		return 0, net.ErrClosed
	}
}

func (f *fakePacketConn) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

func (f *fakePacketConn) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}
}
func (f *fakePacketConn) SetDeadline(time.Time) error      { return nil }
func (f *fakePacketConn) SetReadDeadline(time.Time) error  { return nil }
func (f *fakePacketConn) SetWriteDeadline(time.Time) error { return nil }

// pipeEndpoints dials in memory: each connection is a net.Pipe whose far
// end answers every message with the endpoint's address and the message.
type pipeEndpoints struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed int // far ends that saw their connection end
}

func (e *pipeEndpoints) dial(_ context.Context, _, address string) (net.Conn, error) {
	near, far := net.Pipe()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer far.Close()
		buf := make([]byte, maxDatagram)
		for {
			n, err := far.Read(buf)
			if err != nil {
				e.mu.Lock()
				e.closed++
				e.mu.Unlock()
				return
			}
			if _, err := far.Write([]byte(address + " " + string(buf[:n]))); err != nil {
				return
			}
		}
	}()
	return near, nil
}

func (e *pipeEndpoints) ended() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// In fake time: a session ends after the idle timeout without a datagram
// either way, and not before; a session cap drops new clients.
func TestUDPIdleTimeoutAndCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pc := newFakePacketConn()
		eps := &pipeEndpoints{}
		p := New(Config{
			Listen:         map[ipfamily.Family]netip.Addr{ipfamily.IPv4: loopback},
			Dial:           eps.dial,
			ListenUDP:      func(string, string) (net.PacketConn, error) { return pc, nil },
			UDPIdleTimeout: 10 * time.Second,
			MaxUDPSessions: 2,
		})
		sp := entry("default/dns:dns/udp", model.ProtocolUDP, epA, epB)
		if err := p.Update([]*servicetable.ServicePort{sp}); err != nil {
			t.Fatal(err)
		}
		u := p.port(Key{ID: sp.ID, Family: ipfamily.IPv4}).udp
		client := func(i int) net.Addr { return &net.UDPAddr{IP: net.IPv4(192, 0, 2, byte(i)), Port: 40000} }
		send := func(from int, msg string) {
			pc.in <- datagram{from: client(from), data: msg}
			synctest.Wait()
		}
		expect := func(to int, want string) {
			t.Helper()
			select {
			case d := <-pc.out:
				if d.from.String() != client(to).String() || d.data != want {
					t.Errorf("reply %q to %v, want %q to %v", d.data, d.from, want, client(to))
				}
			default:
				t.Errorf("no reply, want %q to %v", want, client(to))
			}
		}

		send(1, "one")
		expect(1, epA.String()+" one")
		for range 3 {
			time.Sleep(9 * time.Second)
			send(1, "again") // activity keeps the session
			expect(1, epA.String()+" again")
		}
		if n := u.sessionCount(); n != 1 {
			t.Fatalf("%d sessions, want 1", n)
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if n := u.sessionCount(); n != 1 || eps.ended() != 0 {
			t.Fatalf("after 9s idle: %d sessions, %d ended; want 1 open", n, eps.ended())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := u.sessionCount(); n != 0 || eps.ended() != 1 {
			t.Fatalf("after 10s idle: %d sessions, %d ended; want the session gone", n, eps.ended())
		}

		// The cap: two sessions; a third client is dropped until one ends.
		send(1, "x")
		expect(1, epB.String()+" x")
		send(2, "y")
		expect(2, epA.String()+" y")
		send(3, "z")
		if len(pc.out) != 0 {
			t.Errorf("third client answered beyond the cap of 2")
		}
		if n := u.sessionCount(); n != 2 {
			t.Errorf("%d sessions, want the cap of 2", n)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		send(3, "z")
		expect(3, epB.String()+" z")

		if st := p.Stats(); st.UDPSessions != 4 || st.UDPDropped != 1 {
			t.Errorf("stats %+v, want 4 sessions and 1 datagram dropped", st)
		}
		p.Close()
		eps.wg.Wait()
		if n := eps.ended(); n != 4 {
			t.Errorf("%d sessions ended, want 4", n)
		}
	})
}
