package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

func TestServer(t *testing.T) {
	m := New()
	m.ServiceChangesTotal.Inc()
	s := NewServer("", m, klog.Logger{}, ServerOptions{ProxyMode: "nftables"})
	if s.addr != DefaultMetricsBindAddress {
		t.Errorf("default address %q, want %q", s.addr, DefaultMetricsBindAddress)
	}

	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after its context ended, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after its context ended")
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Serve returned", addr)
		}
	}()

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "\nkubeproxy_sync_proxy_rules_service_changes_total 1\n") {
		t.Errorf("GET /metrics = %d, body without the service changes counter:\n%.500s", resp.StatusCode, body)
	}
	// kube-proxy's metrics address also serves /healthz and /proxyMode; the
	// upstream spec "should check kube-proxy urls" asks for /proxyMode's 200.
	for _, c := range []struct{ path, body string }{{"/healthz", "ok"}, {"/proxyMode", "nftables"}} {
		resp, err = client.Get("http://" + addr + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != c.body || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("GET %s = %d %q (%s), want 200 %q text/plain", c.path, resp.StatusCode, body, resp.Header.Get("Content-Type"), c.body)
		}
	}
}

func TestServerWithoutProxyMode(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer("", New(), klog.Logger{}, ServerOptions{}).Serve(ctx, l) }()
	defer func() { cancel(); <-done }()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + l.Addr().String() + "/proxyMode")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /proxyMode without a mode = %d, want 404", resp.StatusCode)
	}
}

func TestServerRunBindError(t *testing.T) {
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	s := NewServer(busy.Addr().String(), New(), klog.Logger{}, ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Run(ctx); err == nil || !strings.Contains(err.Error(), busy.Addr().String()) {
		t.Fatalf("Run on a busy port = %v, want an error naming %s", err, busy.Addr())
	}
}

// TestServerProfiling: /debug/pprof/ is served only with profiling on
// (kube-proxy's --profiling).
func TestServerProfiling(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv := httptest.NewServer(NewServer("", New(), klog.Logger{}, ServerOptions{Profiling: on}).handler)
		resp, err := srv.Client().Get(srv.URL + "/debug/pprof/heap?debug=1")
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if want := map[bool]int{false: 404, true: 200}[on]; resp.StatusCode != want {
			t.Errorf("profiling=%v: GET /debug/pprof/heap = %d, want %d", on, resp.StatusCode, want)
		}
		if on && !strings.Contains(string(body), "heap profile") {
			t.Errorf("profiling on: heap profile body %.200q", body)
		}
	}
}
