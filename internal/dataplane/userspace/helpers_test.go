package userspace

import (
	"context"
	"net"
	"net/netip"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// backend is one echo server on loopback standing for a pod.
type backend struct {
	name     string
	tcp, udp netip.AddrPort
	stop     func() // stops the server (its ports then refuse); idempotent
}

// startBackend runs an echo server named name on 127.0.0.1 with one TCP and
// one UDP port; it is stopped when the test ends.
func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	return startBackendAt(t, name, "127.0.0.1")
}

// startBackendAt is startBackend listening on host (a loopback address).
func startBackendAt(t *testing.T, name, host string) *backend {
	t.Helper()
	b := &backend{name: name}
	ready := make(chan struct{})
	cfg := echo.Config{Name: name, PodIP: loopback, Host: host, TCP: []int{0}, UDP: []int{0},
		Ready: func(tcp, udp []net.Addr) {
			b.tcp = addrPortOf(tcp[0])
			b.udp = addrPortOf(udp[0])
			close(ready)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- echo.Serve(ctx, cfg, klog.Background().V(9)) }()
	stopped := false
	b.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("echo server %s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("echo server %s did not stop", name)
		}
	}
	t.Cleanup(b.stop)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("echo server %s: %v", name, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("echo server %s not ready", name)
	}
	return b
}

// startBackends starts pods pod-a, pod-b, ... and returns them in the
// proxy's endpoint order (by address, then port), which the kernel's choice
// of ports decides.
func startBackends(t *testing.T, n int) []*backend {
	t.Helper()
	var bs []*backend
	for i := range n {
		bs = append(bs, startBackend(t, "pod-"+string(rune('a'+i))))
	}
	slices.SortFunc(bs, func(x, y *backend) int { return x.tcp.Compare(y.tcp) })
	return bs
}

// deadAddr returns a loopback address and port nothing listens on: a
// connect to it is refused.
func deadAddr(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := addrPortOf(l.Addr())
	l.Close()
	return a
}

// entry returns a ClusterIP Service port entry with endpoints eps (all
// ready, in the cluster set).
func entry(id string, proto model.Protocol, eps ...netip.AddrPort) *servicetable.ServicePort {
	sp := &servicetable.ServicePort{ID: id, Family: ipfamily.IPv4, Protocol: proto, Port: 80,
		ClusterIP: netip.MustParseAddr("10.96.0.10"), HasEndpoints: len(eps) > 0}
	for _, ep := range eps {
		sp.ClusterEndpoints = append(sp.ClusterEndpoints, servicetable.Endpoint{Addr: ep.Addr(), Port: ep.Port(), Ready: true, Serving: true})
	}
	sp.AllEndpoints = sp.ClusterEndpoints
	return sp
}

func tcpEPs(bs ...*backend) []netip.AddrPort {
	var out []netip.AddrPort
	for _, b := range bs {
		out = append(out, b.tcp)
	}
	return out
}

// newProxy returns a Proxy listening on 127.0.0.1, closed when the test ends.
func newProxy(t *testing.T, cfg Config) *Proxy {
	t.Helper()
	if cfg.Listen == nil {
		cfg.Listen = map[ipfamily.Family]netip.Addr{ipfamily.IPv4: loopback}
	}
	p := New(cfg)
	t.Cleanup(func() { p.Close() })
	return p
}

// mustUpdate applies entries and returns the address of each entry's
// cluster proxy port, in order.
func mustUpdate(t *testing.T, p *Proxy, entries ...*servicetable.ServicePort) []string {
	t.Helper()
	if err := p.Update(entries); err != nil {
		t.Fatalf("Update: %v", err)
	}
	var out []string
	for _, sp := range entries {
		a, ok := p.Addr(Key{ID: sp.ID, Family: sp.Family, Set: SetCluster})
		if !ok {
			t.Fatalf("no cluster proxy port for %s", sp.ID)
		}
		out = append(out, a.String())
	}
	return out
}

// port returns the open proxy port of k.
func (p *Proxy) port(k Key) *proxyPort {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ports[k]
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// hostname asks the pod behind addr for its name through a new connection.
func hostname(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return echo.TCPLine(ctx, nil, addr, "hostname")
}

// held is an open TCP connection through the proxy and the pod it reached.
type held struct {
	c   net.Conn
	pod string
}

// hold opens a connection to addr, learns its pod and keeps it open until
// the test ends (or the caller closes it).
func hold(t *testing.T, addr string) *held {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	h := &held{c: c}
	h.pod = h.line(t, "hostname")
	return h
}

// line sends one line and returns the answer line.
func (h *held) line(t *testing.T, s string) string {
	t.Helper()
	if _, err := h.c.Write([]byte(s + "\n")); err != nil {
		t.Fatalf("send %q: %v", s, err)
	}
	var got []byte
	buf := make([]byte, 1)
	for len(got) < 4096 {
		if _, err := h.c.Read(buf); err != nil {
			t.Fatalf("receive answer to %q: %v (so far %q)", s, err, got)
		}
		if buf[0] == '\n' {
			return string(got)
		}
		got = append(got, buf[0])
	}
	t.Fatalf("answer to %q too long", s)
	return ""
}

// waitFor polls cond every 10ms for at most 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// proxyFrame matches a stack frame in the package's own (non-test) files.
var proxyFrame = regexp.MustCompile(`/dataplane/userspace/[a-z]+\.go:`)

// noProxyGoroutines waits (bounded) until no goroutine runs code of this
// package other than the tests.
func noProxyGoroutines(t *testing.T) {
	t.Helper()
	var left []string
	for range 500 {
		buf := make([]byte, 1<<20)
		left = left[:0]
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if proxyFrame.MatchString(g) {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d goroutines of the proxy left:\n%s", len(left), strings.Join(left, "\n\n"))
}
