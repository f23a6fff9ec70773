package userspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Requests through the proxy reach the pods in turn, and the line and HTTP
// protocols both pass.
func TestTCPRoundRobinSpread(t *testing.T) {
	a, b, c := startBackend(t, "pod-a"), startBackend(t, "pod-b"), startBackend(t, "pod-c")
	p := newProxy(t, Config{})
	addr := mustUpdate(t, p, entry("default/web:http/tcp", model.ProtocolTCP, tcpEPs(a, b, c)...))[0]
	ctx := testCtx(t)
	count := map[string]int{}
	for range 9 {
		name, err := hostname(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		count[name]++
	}
	if count["pod-a"] != 3 || count["pod-b"] != 3 || count["pod-c"] != 3 {
		t.Errorf("9 requests spread %v, want 3 each", count)
	}
	// The client's address is lost: a client bound to 127.0.0.5 is seen by
	// the pod as the proxy's own connection from 127.0.0.1.
	fromDot5 := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 5)}}).DialContext
	r, err := echo.Get(ctx, fromDot5, "http://"+addr+"/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Client, "127.0.0.1:") || r.Server == addr {
		t.Errorf("pod saw client %s, server %s; want the proxy's connection from 127.0.0.1", r.Client, r.Server)
	}
}

// A half-close passes through: a command sent without newline is answered
// at the client's EOF, and the answer and the pod's EOF come back.
func TestTCPHalfClose(t *testing.T) {
	a := startBackend(t, "pod-a")
	p := newProxy(t, Config{})
	addr := mustUpdate(t, p, entry("default/web:http/tcp", model.ProtocolTCP, a.tcp))[0]
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hostname")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "pod-a\n" {
		t.Errorf("after half-close got %q, %v; want %q then EOF", got, err, "pod-a\n")
	}
	// A large payload both ways, unchanged.
	c2, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i%251) | 0x80 // never '\n'
	}
	werr := make(chan error, 1)
	go func() {
		_, err := c2.Write(payload)
		if err == nil {
			err = c2.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	back, err := io.ReadAll(c2)
	if err != nil || string(back) != string(payload) {
		t.Errorf("1 MiB echo: got %d bytes, %v; want the payload back", len(back), err)
	}
	if err := <-werr; err != nil {
		t.Error(err)
	}
}

func TestTCPLeastConnections(t *testing.T) {
	for _, tc := range []struct {
		sel  Selection
		want int // the endpoint of the fourth connection
	}{
		{LeastConnections, 1}, // the only one with no connection
		{RoundRobin, 0},       // its turn
	} {
		t.Run(tc.sel.String(), func(t *testing.T) {
			bs := startBackends(t, 3)
			p := newProxy(t, Config{Selection: tc.sel})
			sp := entry("default/web:http/tcp", model.ProtocolTCP, tcpEPs(bs...)...)
			addr := mustUpdate(t, p, sp)[0]
			var hs []*held
			for _, b := range bs {
				h := hold(t, addr)
				if h.pod != b.name {
					t.Fatalf("connection reached %s, want %s", h.pod, b.name)
				}
				hs = append(hs, h)
			}
			bal := p.port(Key{ID: sp.ID, Family: ipfamily.IPv4}).bal
			if n := bal.activeCount(bs[1].tcp); n != 1 {
				t.Fatalf("active connections to %s = %d, want 1", bs[1].name, n)
			}
			hs[1].c.Close()
			waitFor(t, "the second connection to end", func() bool { return bal.activeCount(bs[1].tcp) == 0 })
			if h := hold(t, addr); h.pod != bs[tc.want].name {
				t.Errorf("fourth connection reached %s, want %s", h.pod, bs[tc.want].name)
			}
		})
	}
}

func TestTCPAffinity(t *testing.T) {
	a, b, c := startBackend(t, "pod-a"), startBackend(t, "pod-b"), startBackend(t, "pod-c")
	pods := map[string]*backend{"pod-a": a, "pod-b": b, "pod-c": c}
	p := newProxy(t, Config{})
	sp := entry("default/web:http/tcp", model.ProtocolTCP, tcpEPs(a, b, c)...)
	sp.AffinityTimeout = time.Hour
	addr := mustUpdate(t, p, sp)[0]
	ctx := testCtx(t)
	first, err := hostname(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if got, err := hostname(ctx, addr); err != nil || got != first {
			t.Fatalf("request reached %q, %v; want %s (affinity)", got, err, first)
		}
	}
	// The pinned pod dies: the next request is retried on another pod, and
	// the client sticks to that one.
	pods[first].stop()
	second, err := hostname(ctx, addr)
	if err != nil || second == first {
		t.Fatalf("after %s stopped, request reached %q, %v", first, second, err)
	}
	for range 4 {
		if got, err := hostname(ctx, addr); err != nil || got != second {
			t.Fatalf("request reached %q, %v; want %s (new affinity)", got, err, second)
		}
	}
}

// runLoop makes n sequential requests to addr, calling before(i) before
// request i, and returns how many failed.
func runLoop(t *testing.T, addr string, n int, before func(i int)) (failed int) {
	t.Helper()
	ctx := testCtx(t)
	for i := range n {
		before(i)
		if _, err := hostname(ctx, addr); err != nil {
			failed++
			t.Logf("request %d: %v", i, err)
		}
	}
	return failed
}

// A pod killed under a bounded client loop, before the endpoints catch up:
// with the retry no request fails; without it (Attempts 1) every request
// that picks the dead pod fails.
func TestTCPRetryHidesDeadPod(t *testing.T) {
	const n = 60
	for _, tc := range []struct {
		name     string
		attempts int
	}{{"retry", 0}, {"no retry", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			bs := startBackends(t, 3)
			p := newProxy(t, Config{Attempts: tc.attempts})
			addr := mustUpdate(t, p, entry("default/web:http/tcp", model.ProtocolTCP, tcpEPs(bs...)...))[0]
			failed := runLoop(t, addr, n, func(i int) {
				if i == n/3 {
					bs[1].stop() // its port now refuses; the endpoints still list it
				}
			})
			st := p.Stats()
			t.Logf("%d of %d requests failed; %+v", failed, n, st)
			if tc.attempts == 1 {
				// Round robin from the third endpoint on: 13 of the last 40
				// requests pick the second.
				if want := (n - n/3) / 3; failed != want || st.Refused != uint64(want) || st.FailedConnects != uint64(want) {
					t.Errorf("without retry %d of %d requests failed (%+v), want %d", failed, n, st, want)
				}
				return
			}
			if failed != 0 || st.Refused != 0 || st.Connections != n {
				t.Errorf("with retry %d of %d requests failed (%+v), want 0", failed, n, st)
			}
			// Each retry moves the turn on: every other request after the
			// second one past the stop picks the dead pod first.
			if st.FailedConnects != (n-n/3-2+1)/2 {
				t.Errorf("%d failed connects, want %d", st.FailedConnects, (n-n/3-2+1)/2)
			}
		})
	}
}

// refusingDial fails every connect to bad at once (connection refused) and
// stalls every connect to slow until its deadline; others dial for real.
type refusingDial struct {
	bad, slow netip.AddrPort
	dials     atomic.Int32
}

func (d *refusingDial) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.dials.Add(1)
	switch address {
	case d.bad.String():
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	case d.slow.String():
		<-ctx.Done()
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	return (&net.Dialer{}).DialContext(ctx, network, address)
}

func TestTCPRetryInjectedFailures(t *testing.T) {
	a := startBackend(t, "pod-a")
	bad, slow := netip.MustParseAddrPort("127.0.0.2:81"), netip.MustParseAddrPort("127.0.0.3:82")
	t.Run("refused and timed out endpoints are skipped", func(t *testing.T) {
		d := &refusingDial{bad: bad, slow: slow}
		p := newProxy(t, Config{Dial: d.dial, DialTimeout: 100 * time.Millisecond})
		// Sorted: a (127.0.0.1), bad, slow. Start at bad: bad, slow, a.
		addr := mustUpdate(t, p, entry("default/web:http/tcp", model.ProtocolTCP, a.tcp, bad, slow))[0]
		if failed := runLoop(t, addr, 1, func(int) {}); failed != 0 {
			t.Fatal("first request failed")
		}
		d.dials.Store(0)
		began := time.Now()
		got, err := hostname(testCtx(t), addr)
		if err != nil || got != "pod-a" {
			t.Fatalf("got %q, %v; want pod-a after two failed connects", got, err)
		}
		if n := d.dials.Load(); n != 3 {
			t.Errorf("%d connects, want 3 (refused, timed out, pod-a)", n)
		}
		if el := time.Since(began); el < 100*time.Millisecond || el > 3*time.Second {
			t.Errorf("took %v, want one dial timeout (100ms) and little more", el)
		}
	})
	t.Run("the retry budget bounds the time", func(t *testing.T) {
		d := &refusingDial{slow: slow}
		p := newProxy(t, Config{Dial: d.dial, DialTimeout: 10 * time.Second, RetryBudget: 200 * time.Millisecond, Attempts: 5})
		addr := mustUpdate(t, p, entry("default/web:http/tcp", model.ProtocolTCP, slow))[0]
		began := time.Now()
		if got, err := hostname(testCtx(t), addr); err == nil {
			t.Fatalf("got %q through a stalled endpoint", got)
		}
		if el := time.Since(began); el > 3*time.Second {
			t.Errorf("refused after %v, want about the budget (200ms)", el)
		}
	})
}

// Update in place: an open connection to a removed endpoint runs on, new
// connections never reach it, the socket stays the same; a removed entry's
// proxy port closes.
func TestUpdateInPlace(t *testing.T) {
	bs := startBackends(t, 2)
	a, b := bs[0], bs[1]
	p := newProxy(t, Config{})
	sp := entry("default/web:http/tcp", model.ProtocolTCP, a.tcp, b.tcp)
	addr := mustUpdate(t, p, sp)[0]
	h := hold(t, addr)
	if h.pod != a.name {
		t.Fatalf("first connection reached %s", h.pod)
	}
	addr2 := mustUpdate(t, p, entry(sp.ID, model.ProtocolTCP, b.tcp))[0]
	if addr2 != addr {
		t.Fatalf("proxy port moved from %s to %s", addr, addr2)
	}
	if got := h.line(t, "echo still here"); got != "still here" {
		t.Errorf("open connection to the removed endpoint answered %q", got)
	}
	ctx := testCtx(t)
	for range 4 {
		if got, err := hostname(ctx, addr); err != nil || got != b.name {
			t.Fatalf("new request reached %q, %v; want %s only", got, err, b.name)
		}
	}
	// New endpoints are used at once.
	mustUpdate(t, p, entry(sp.ID, model.ProtocolTCP, a.tcp, b.tcp))
	seen := map[string]bool{}
	for range 2 {
		got, err := hostname(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		seen[got] = true
	}
	if !seen[a.name] || !seen[b.name] {
		t.Errorf("after re-adding %s, two requests reached %v", a.name, seen)
	}
	// The entry leaves: its listener closes, the open connection runs on.
	if err := p.Update(nil); err != nil {
		t.Fatal(err)
	}
	if ps := p.Ports(); len(ps) != 0 {
		t.Errorf("ports after removing every entry: %v", ps)
	}
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("proxy port %s still accepts after its entry left", addr)
	}
	if got := h.line(t, "echo after"); got != "after" {
		t.Errorf("open connection after its entry left answered %q", got)
	}
}

// No endpoint: the connection is reset at once (on loopback the reset can
// come before the connect completes).
func TestTCPNoEndpointsRefuses(t *testing.T) {
	p := newProxy(t, Config{})
	addr := mustUpdate(t, p, entry("default/none:http/tcp", model.ProtocolTCP))[0]
	for range 5 {
		began := time.Now()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			var n int
			n, err = c.Read(make([]byte, 1))
			c.Close()
			if n != 0 {
				t.Fatalf("read %d bytes from a Service without endpoints", n)
			}
		}
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Errorf("connection ended with %v, want a reset", err)
		}
		if el := time.Since(began); el > time.Second {
			t.Errorf("refused after %v, want at once", el)
		}
	}
}

// Each endpoint set the policies use gets its own proxy port.
func TestPolicySets(t *testing.T) {
	a, b := startBackend(t, "pod-a"), startBackend(t, "pod-b")
	sp := entry("default/web:http/tcp", model.ProtocolTCP, a.tcp, b.tcp)
	sp.NodePort = 30080
	sp.ExternalPolicyLocal = true
	sp.LocalEndpoints = []servicetable.Endpoint{{Addr: b.tcp.Addr(), Port: b.tcp.Port(), Local: true, Ready: true, Serving: true}}
	internalLocal := entry("default/local:http/tcp", model.ProtocolTCP)
	internalLocal.InternalPolicyLocal = true
	internalLocal.HasEndpoints = true
	internalLocal.LocalEndpoints = []servicetable.Endpoint{{Addr: a.tcp.Addr(), Port: a.tcp.Port(), Local: true, Ready: true, Serving: true}}
	p := newProxy(t, Config{})
	if err := p.Update([]*servicetable.ServicePort{sp, internalLocal}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, pt := range p.Ports() {
		keys = append(keys, pt.Key.String())
	}
	want := "default/local:http/tcp IPv4 local,default/web:http/tcp IPv4 cluster,default/web:http/tcp IPv4 local"
	if got := strings.Join(keys, ","); got != want {
		t.Fatalf("ports = %s, want %s", got, want)
	}
	ctx := testCtx(t)
	for _, tc := range []struct {
		key  Key
		want map[string]bool
	}{
		{Key{ID: sp.ID, Family: ipfamily.IPv4, Set: SetCluster}, map[string]bool{"pod-a": true, "pod-b": true}},
		{Key{ID: sp.ID, Family: ipfamily.IPv4, Set: SetLocal}, map[string]bool{"pod-b": true}},
		{Key{ID: internalLocal.ID, Family: ipfamily.IPv4, Set: SetLocal}, map[string]bool{"pod-a": true}},
	} {
		addr, _ := p.Addr(tc.key)
		got := map[string]bool{}
		for range 4 {
			name, err := hostname(ctx, addr.String())
			if err != nil {
				t.Fatal(err)
			}
			got[name] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s reached %v, want %v", tc.key, got, tc.want)
		}
	}
}

// An entry the proxy cannot serve is named in the error; the others are
// served.
func TestUpdateBadEntries(t *testing.T) {
	a := startBackend(t, "pod-a")
	p := newProxy(t, Config{})
	good := entry("default/web:http/tcp", model.ProtocolTCP, a.tcp)
	sctp := entry("default/sig:sig/sctp", model.ProtocolSCTP, a.tcp)
	v6 := entry("default/web:http/tcp", model.ProtocolTCP, netip.MustParseAddrPort("[fd00::1]:80"))
	v6.Family = ipfamily.IPv6
	err := p.Update([]*servicetable.ServicePort{good, sctp, v6, good})
	for _, want := range []string{
		"Service port default/sig:sig/sctp (IPv4): protocol SCTP is not supported",
		"Service port default/web:http/tcp (IPv6): no listen address for IPv6",
		"Service port default/web:http/tcp (IPv4): listed twice",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Update error %v, want it to say %q", err, want)
		}
	}
	if ps := p.Ports(); len(ps) != 1 || ps[0].Key.ID != good.ID {
		t.Fatalf("ports = %v, want only %s", ps, good.ID)
	}
	addr, _ := p.Addr(Key{ID: good.ID, Family: ipfamily.IPv4})
	if got, err := hostname(testCtx(t), addr.String()); err != nil || got != "pod-a" {
		t.Errorf("good entry answered %q, %v", got, err)
	}
}

// Close ends every connection and session and every goroutine the proxy
// started; so does a connection's normal end.
func TestNoGoroutineLeak(t *testing.T) {
	a, b := startBackend(t, "pod-a"), startBackend(t, "pod-b")
	p := New(Config{Listen: map[ipfamily.Family]netip.Addr{ipfamily.IPv4: loopback}})
	tcp := entry("default/web:http/tcp", model.ProtocolTCP, a.tcp, deadAddr(t), b.tcp)
	udp := entry("default/dns:dns/udp", model.ProtocolUDP, a.udp, b.udp)
	addrs := mustUpdate(t, p, tcp, udp)
	ctx := testCtx(t)
	for range 6 {
		if _, err := hostname(ctx, addrs[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := echo.UDP(ctx, nil, addrs[1], "hostname"); err != nil {
			t.Fatal(err)
		}
	}
	h := hold(t, addrs[0])
	_ = h.c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := h.c.Read(make([]byte, 1)); err == nil {
		t.Errorf("open connection read %d bytes after Close", n)
	}
	h.c.Close()
	noProxyGoroutines(t)
	if err := p.Update([]*servicetable.ServicePort{tcp}); err == nil {
		t.Error("Update after Close succeeded")
	}
}
