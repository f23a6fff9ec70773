package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
)

// echoServer answers on TCP and UDP echoPort of its pod, over IPv4 and IPv6,
// with "<pod name> <client address as seen>\n".
type echoServer struct {
	name    string
	mu      sync.Mutex
	closers []io.Closer
	wg      sync.WaitGroup
}

// startEcho opens the pod's listeners (in its namespace: a socket keeps the
// namespace it was made in) and serves them until close or test cleanup.
func startEcho(t testing.TB, p *pod) *echoServer {
	t.Helper()
	e := &echoServer{name: p.name}
	var tcps []net.Listener
	var udps []net.PacketConn
	err := p.ns.Do(func() error {
		for _, a := range []netip.Addr{p.ip, p.ip6} {
			hp := netip.AddrPortFrom(a, echoPort).String()
			l, err := net.Listen("tcp", hp)
			if err != nil {
				return err
			}
			tcps = append(tcps, l)
			u, err := net.ListenPacket("udp", hp)
			if err != nil {
				return err
			}
			udps = append(udps, u)
		}
		return nil
	})
	for _, l := range tcps {
		e.closers = append(e.closers, l)
	}
	for _, u := range udps {
		e.closers = append(e.closers, u)
	}
	if err != nil {
		e.close()
		t.Fatalf("echo server in pod %s: %v", p.name, err)
	}
	for _, l := range tcps {
		e.wg.Add(1)
		go e.serveTCP(l)
	}
	for _, u := range udps {
		e.wg.Add(1)
		go e.serveUDP(u)
	}
	t.Cleanup(e.close)
	return e
}

// close stops every listener and waits for the serving goroutines.
func (e *echoServer) close() {
	e.mu.Lock()
	cs := e.closers
	e.closers = nil
	e.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	e.wg.Wait()
}

func (e *echoServer) serveTCP(l net.Listener) {
	defer e.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		// The reply is written at once and the connection closed: the client
		// sends nothing, so the close is a FIN, never a reset.
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = fmt.Fprintf(c, "%s %s\n", e.name, addrOf(c.RemoteAddr()))
		c.Close()
	}
}

func (e *echoServer) serveUDP(u net.PacketConn) {
	defer e.wg.Done()
	buf := make([]byte, 1500)
	for {
		_, from, err := u.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. an ICMP error queued on the socket
		}
		_, _ = u.WriteTo([]byte(fmt.Sprintf("%s %s\n", e.name, addrOf(from))), from)
	}
}

func addrOf(a net.Addr) netip.Addr {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// reply is an echo server's answer: which pod answered and whom it saw.
type reply struct {
	Pod string
	Src netip.Addr
}

func (r reply) String() string { return r.Pod + " " + r.Src.String() }

func parseReply(s string) (reply, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return reply{}, fmt.Errorf("unexpected reply %q", s)
	}
	a, err := netip.ParseAddr(f[1])
	if err != nil {
		return reply{}, fmt.Errorf("unexpected reply %q: %w", s, err)
	}
	return reply{Pod: f[0], Src: a}, nil
}

// dialIn opens a connection from inside ns (the socket stays in ns). local,
// when valid, is the source address.
func dialIn(ns *netns.NS, network, addr string, local netip.Addr, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: timeout}
		if local.IsValid() {
			switch {
			case strings.HasPrefix(network, "tcp"):
				d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
			case strings.HasPrefix(network, "udp"):
				d.LocalAddr = &net.UDPAddr{IP: local.AsSlice()}
			}
		}
		var err error
		c, err = d.Dial(network, addr)
		return err
	})
	return c, err
}

// Default timeouts: an answer is quick on a local topology; "dropped" means
// no answer within dropWait.
const (
	reqTimeout = 2 * time.Second
	dropWait   = time.Second
)

// tcpReq connects from ns to addr, reads the echo reply and closes.
func tcpReq(ns *netns.NS, addr string, timeout time.Duration) (reply, error) {
	return tcpReqFrom(ns, netip.Addr{}, addr, timeout)
}

// tcpReqFrom is tcpReq with a chosen source address.
func tcpReqFrom(ns *netns.NS, local netip.Addr, addr string, timeout time.Duration) (reply, error) {
	c, err := dialIn(ns, "tcp", addr, local, timeout)
	if err != nil {
		return reply{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(c)
	if err != nil {
		return reply{}, err
	}
	return parseReply(string(b))
}

// udpReq sends one datagram from ns to addr and waits for the reply.
func udpReq(ns *netns.NS, addr string, timeout time.Duration) (reply, error) {
	return udpReqFrom(ns, netip.Addr{}, addr, timeout)
}

// udpReqFrom is udpReq with a chosen source address.
func udpReqFrom(ns *netns.NS, local netip.Addr, addr string, timeout time.Duration) (reply, error) {
	c, err := dialIn(ns, "udp", addr, local, timeout)
	if err != nil {
		return reply{}, err
	}
	defer c.Close()
	return udpExchange(c, timeout)
}

// udpExchange sends one datagram on a connected UDP socket and reads one
// reply (an ICMP port unreachable reads as ECONNREFUSED).
func udpExchange(c net.Conn, timeout time.Duration) (reply, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return reply{}, err
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if err != nil {
		return reply{}, err
	}
	return parseReply(string(buf[:n]))
}

// req sends one request of proto ("tcp" or "udp") from ns to addr.
func req(ns *netns.NS, proto, addr string, timeout time.Duration) (reply, error) {
	if proto == "udp" {
		return udpReq(ns, addr, timeout)
	}
	return tcpReq(ns, addr, timeout)
}

// outcome classifies a request's error: "ok", "refused" (TCP RST or ICMP
// port unreachable), "eperm" (send refused by a local reject),
// "unreachable" (ICMP host or network unreachable), "timeout" (dropped), or
// the error text.
func outcome(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EPERM):
		// A host-originated packet rejected in the output path: the kernel
		// fails the send itself.
		return "eperm"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return err.Error()
	}
}

// hostPort joins an address and a port ("[v6]:port" for IPv6).
func hostPort(a netip.Addr, port int) string {
	return netip.AddrPortFrom(a, uint16(port)).String()
}

// requests sends n requests of proto from ns to addr and returns the
// replies; it fails t on the first request that is not answered.
func requests(t testing.TB, ns *netns.NS, proto, addr string, n int) []reply {
	t.Helper()
	out := make([]reply, 0, n)
	for i := 0; i < n; i++ {
		r, err := req(ns, proto, addr, reqTimeout)
		if err != nil {
			t.Fatalf("%s %s request %d/%d: %v (replies so far %v)", proto, addr, i+1, n, err, out)
		}
		out = append(out, r)
	}
	return out
}

// byPod counts replies per answering pod.
func byPod(rs []reply) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[r.Pod]++
	}
	return m
}

// sources lists the distinct client addresses the pods saw.
func sources(rs []reply) []netip.Addr {
	var out []netip.Addr
	for _, r := range rs {
		if !slices.Contains(out, r.Src) {
			out = append(out, r.Src)
		}
	}
	return out
}

// eventually polls cond (every 50ms, each call bounded by the caller) until
// it reports done or timeout passes, then fails t with cond's last message.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	msg := ""
	for tries := 1; ; tries++ {
		var done bool
		if done, msg = cond(); done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not done after %v (%d tries): %s", what, timeout, tries, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventuallyAnswered waits until a request of proto from ns to addr is
// answered, by one of pods when given, and returns that reply.
func eventuallyAnswered(t testing.TB, ns *netns.NS, proto, addr string, pods ...string) reply {
	t.Helper()
	var got reply
	eventually(t, 10*time.Second, fmt.Sprintf("%s %s answered by %v", proto, addr, pods), func() (bool, string) {
		r, err := req(ns, proto, addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		if len(pods) > 0 && !slices.Contains(pods, r.Pod) {
			return false, "answered by " + r.String()
		}
		got = r
		return true, ""
	})
	return got
}

// httpGet does one HTTP/1.1 GET from ns (for health checks).
func httpGet(ns *netns.NS, url string, timeout time.Duration) (*http.Response, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	c, err := dialIn(ns, "tcp", req.URL.Host, netip.Addr{}, timeout)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	req.Close = true
	if err := req.Write(c); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}
