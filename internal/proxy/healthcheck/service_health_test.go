package healthcheck

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeHealth is a HealthChecker whose answer the test sets.
type fakeHealth struct{ unhealthy atomic.Bool }

func (f *fakeHealth) Health() ProxyHealth { return ProxyHealth{Healthy: !f.unhealthy.Load()} }

var (
	svcA = types.NamespacedName{Namespace: "default", Name: "alpha"}
	svcB = types.NamespacedName{Namespace: "prod", Name: "beta"}
)

func wantServiceBody(nsn types.NamespacedName, n int, healthy bool) string {
	return "{\n" +
		"\t\"service\": {\n" +
		"\t\t\"namespace\": \"" + nsn.Namespace + "\",\n" +
		"\t\t\"name\": \"" + nsn.Name + "\"\n" +
		"\t},\n" +
		"\t\"localEndpoints\": " + strconv.Itoa(n) + ",\n" +
		"\t\"serviceProxyHealthy\": " + strconv.FormatBool(healthy) + "\n" +
		"}"
}

// checkService GETs a health check and compares status, headers and the exact body.
func checkService(t *testing.T, addr string, nsn types.NamespacedName, code, endpoints int, healthy bool) {
	t.Helper()
	got := mustGet(t, addr, "/")
	want := wantServiceBody(nsn, endpoints, healthy)
	if got.code != code || got.body != want {
		t.Errorf("GET %s (%s) = %d\n%s\nwant %d\n%s", addr, nsn, got.code, got.body, code, want)
	}
	checkJSONHeaders(t, got.headers)
	if w := got.headers.Values("X-Load-Balancing-Endpoint-Weight"); !cmp.Equal(w, []string{strconv.Itoa(endpoints)}) {
		t.Errorf("GET %s: X-Load-Balancing-Endpoint-Weight = %q, want %d", addr, w, endpoints)
	}
}

// waitRunning polls until Run has started, so SyncServices opens sockets itself.
func waitRunning(t *testing.T, s *ServiceHealthServer) {
	t.Helper()
	eventually(t, 5*time.Second, func() error {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if !s.running {
			return errors.New("Run has not started")
		}
		return nil
	})
}

func newTestServiceServer(ln Listener, health HealthChecker, addrs ...string) *ServiceHealthServer {
	cfg := ServiceHealthConfig{NodeName: "node1", Family: v1.IPv4Protocol, Health: health, Listener: ln}
	for _, a := range addrs {
		cfg.Addresses = append(cfg.Addresses, netip.MustParseAddr(a))
	}
	return NewServiceHealthServer(cfg)
}

func TestServiceHealthSync(t *testing.T) {
	ln := newLoopbackListener()
	health := &fakeHealth{}
	s := newTestServiceServer(ln, health, "127.0.0.1")

	// Before Run, the wanted state is only recorded.
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: 30001}); err != nil {
		t.Fatalf("SyncServices before Run: %v", err)
	}
	if calls := ln.Calls(); len(calls) != 0 {
		t.Fatalf("listened before Run: %q", calls)
	}
	runInBackground(t, s.Run)
	addrA := ln.waitAddr(t, "127.0.0.1:30001")

	// No endpoints yet: 503.
	checkService(t, addrA, svcA, 503, 0, true)
	// Local endpoints: 200 with the count as weight; unknown Services ignored.
	if err := s.SyncEndpoints(map[types.NamespacedName]int{svcA: 2, svcB: 7}); err != nil {
		t.Fatal(err)
	}
	checkService(t, addrA, svcA, 200, 2, true)
	// Proxy unhealthy: 503 however many endpoints.
	health.unhealthy.Store(true)
	checkService(t, addrA, svcA, 503, 2, false)
	health.unhealthy.Store(false)

	// Add B: opened at once; A left alone, keeping its count.
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: 30001, svcB: 30002}); err != nil {
		t.Fatalf("SyncServices: %v", err)
	}
	addrB := ln.Addr("127.0.0.1:30002")
	if addrB == "" {
		t.Fatalf("SyncServices while running did not open B")
	}
	checkService(t, addrA, svcA, 200, 2, true)
	checkService(t, addrB, svcB, 503, 0, true)
	if err := s.SyncEndpoints(map[types.NamespacedName]int{svcB: 1}); err != nil {
		t.Fatal(err)
	}
	checkService(t, addrA, svcA, 503, 0, true) // missing from the map: no endpoints
	checkService(t, addrB, svcB, 200, 1, true)

	// Remove A and move B to another port.
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcB: 30003}); err != nil {
		t.Fatalf("SyncServices: %v", err)
	}
	waitRefused(t, addrA)
	waitRefused(t, addrB)
	addrB2 := ln.Addr("127.0.0.1:30003")
	checkService(t, addrB2, svcB, 503, 0, true) // a new health check starts with no endpoints

	want := []string{"tcp4 127.0.0.1:30001", "tcp4 127.0.0.1:30002", "tcp4 127.0.0.1:30003"}
	if diff := cmp.Diff(want, ln.Calls()); diff != "" {
		t.Errorf("listen calls (-want +got):\n%s", diff)
	}
}

// TestServiceHealthPortConflict binds a real port first: the Service asking for
// it is reported by name and port, the other Service still serves, and the
// failed one is retried (and succeeds) once the port is free.
func TestServiceHealthPortConflict(t *testing.T) {
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	ln := newLoopbackListener(busyPort)
	s := newTestServiceServer(ln, nil, "127.0.0.1")
	runInBackground(t, s.Run)
	waitRunning(t, s)

	services := map[types.NamespacedName]uint16{svcA: uint16(busyPort), svcB: 30002}
	err = s.SyncServices(services)
	var le *ListenError
	if !errors.As(err, &le) {
		t.Fatalf("SyncServices with a busy port = %v, want a *ListenError", err)
	}
	if le.Service != svcA || int(le.Port) != busyPort || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("ListenError = %+v (%v), want service %s port %d, EADDRINUSE", le, err, svcA, busyPort)
	}
	if msg := err.Error(); !strings.Contains(msg, "default/alpha") || !strings.Contains(msg, strconv.Itoa(busyPort)) {
		t.Errorf("error %q does not name the Service and port", msg)
	}
	if err := s.SyncEndpoints(map[types.NamespacedName]int{svcB: 3}); err != nil {
		t.Fatal(err)
	}
	checkService(t, ln.Addr("127.0.0.1:30002"), svcB, 200, 3, true)

	// Retried on every sync while the port stays busy.
	if err := s.SyncServices(services); !errors.As(err, &le) || le.Service != svcA {
		t.Errorf("second SyncServices = %v, want the same ListenError", err)
	}
	busy.Close()
	if err := s.SyncServices(services); err != nil {
		t.Fatalf("SyncServices after the port was freed: %v", err)
	}
	checkService(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(busyPort)), svcA, 503, 0, true)
	checkService(t, ln.Addr("127.0.0.1:30002"), svcB, 200, 3, true)
}

// TestServiceHealthMultipleAddresses: one server per node address; when one
// address cannot be bound, the ones already opened are closed again.
func TestServiceHealthMultipleAddresses(t *testing.T) {
	busy, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("bind 127.0.0.2 (Linux routes all of 127/8 to lo): %v", err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	ln := newLoopbackListener(busyPort)
	s := newTestServiceServer(ln, nil, "127.0.0.1", "127.0.0.2")
	runInBackground(t, s.Run)
	waitRunning(t, s)

	err = s.SyncServices(map[types.NamespacedName]uint16{svcA: 30001, svcB: uint16(busyPort)})
	var le *ListenError
	if !errors.As(err, &le) || le.Service != svcB {
		t.Fatalf("SyncServices = %v, want a ListenError for %s", err, svcB)
	}
	// B's first address was bound, then closed when the second failed.
	waitRefused(t, ln.Addr(net.JoinHostPort("127.0.0.1", strconv.Itoa(busyPort))))
	// A serves on both addresses.
	for _, a := range []string{"127.0.0.1:30001", "127.0.0.2:30001"} {
		checkService(t, ln.Addr(a), svcA, 503, 0, true)
	}
}

func TestServiceHealthRunLifetime(t *testing.T) {
	ln := newLoopbackListener()
	s := newTestServiceServer(ln, nil, "127.0.0.1")
	stop := runInBackground(t, s.Run)
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: 30001}); err != nil {
		// Run may not have started yet: then Run opens it.
		t.Logf("SyncServices: %v", err)
	}
	addr := ln.waitAddr(t, "127.0.0.1:30001")
	checkService(t, addr, svcA, 503, 0, true)

	stop()
	waitRefused(t, addr)

	// After Run: state is recorded, nothing is opened, Run cannot restart.
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: 30001, svcB: 30002}); err != nil {
		t.Errorf("SyncServices after Run: %v", err)
	}
	if got := ln.Addr("127.0.0.1:30002"); got != "" {
		t.Errorf("SyncServices after Run opened %s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.Run(ctx); err == nil {
		t.Errorf("second Run = nil, want an error")
	}
}

func TestServiceHealthListenNetwork(t *testing.T) {
	for _, tc := range []struct {
		family v1.IPFamily
		addrs  []netip.Addr
		want   []string
	}{
		{v1.IPv4Protocol, nil, []string{"tcp4 0.0.0.0:30001"}},
		{v1.IPv6Protocol, nil, []string{"tcp6 [::]:30001"}},
		{"", nil, []string{"tcp 0.0.0.0:30001"}},
		{v1.IPv6Protocol, []netip.Addr{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")},
			[]string{"tcp6 [fd00::1]:30001", "tcp6 [fd00::2]:30001"}},
	} {
		rec := &recordingListener{}
		s := NewServiceHealthServer(ServiceHealthConfig{Family: tc.family, Addresses: tc.addrs, Listener: rec})
		s.running = true // as if Run were running
		if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: 30001}); err != nil {
			t.Fatalf("%s: %v", tc.family, err)
		}
		if diff := cmp.Diff(tc.want, rec.calls); diff != "" {
			t.Errorf("family %q: listen calls (-want +got):\n%s", tc.family, diff)
		}
		s.mu.Lock()
		s.closeInstance(svcA, s.services[svcA])
		s.mu.Unlock()
		s.serving.Wait()
	}
}

// recordingListener records Listen calls and hands out loopback listeners on
// free ports, whatever was asked.
type recordingListener struct{ calls []string }

func (r *recordingListener) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	r.calls = append(r.calls, network+" "+address)
	return net.Listen("tcp4", "127.0.0.1:0")
}

// TestServiceHandlerClosed: a request that races with the Service's removal
// gets kube-proxy's empty answer.
func TestServiceHandlerClosed(t *testing.T) {
	s := NewServiceHealthServer(ServiceHealthConfig{})
	got := serve(serviceHandler{name: svcA, s: s}, "/")
	if got.code != 200 || got.body != "" || got.headers.Get("Content-Type") != "" {
		t.Errorf("closed healthcheck answered %d %q %v, want an empty 200", got.code, got.body, got.headers)
	}
}
