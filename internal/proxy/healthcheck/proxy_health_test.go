package healthcheck

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/model"
)

// t0 is where the clock of every synctest bubble starts (midnight UTC
// 2000-01-01, as testing/synctest documents), in the location time.Now
// gives, so that the bodies' times read as the server writes them.
var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Local()

// ts formats t0+d as the JSON body does.
func ts(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }

type fakeProbes struct {
	mu      sync.Mutex
	healthz map[int]int
	livez   map[int]int
}

func newFakeProbes() *fakeProbes {
	return &fakeProbes{healthz: map[int]int{}, livez: map[int]int{}}
}

func (p *fakeProbes) CountHealthz(code int) { p.mu.Lock(); p.healthz[code]++; p.mu.Unlock() }
func (p *fakeProbes) CountLivez(code int)   { p.mu.Lock(); p.livez[code]++; p.mu.Unlock() }

// serve runs one request through h and returns the answer.
func serve(h http.Handler, path string) response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return response{code: rec.Code, headers: rec.Header(), body: rec.Body.String()}
}

func checkJSONHeaders(t *testing.T, h http.Header) {
	t.Helper()
	if got := h.Values("Content-Type"); !cmp.Equal(got, []string{"application/json"}) {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	if got := h.Values("X-Content-Type-Options"); !cmp.Equal(got, []string{"nosniff"}) {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
	}
}

// TestProxyHealthTiming walks the health state machine on a synctest
// bubble's clock, as kube-proxy's own test does on a fake clock, checking
// /healthz and /livez status codes and exact bodies after every step.
func TestProxyHealthTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probes := newFakeProbes()
		hs := NewProxyHealthServer(ProxyHealthConfig{
			HealthTimeout: HealthTimeout(5 * time.Second), // 10s
			Probes:        probes,
		})
		h := hs.Handler()
		v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol

		steps := []struct {
			name string
			do   func()
			code int
			// healthz body; the livez body is the same without "nodeEligible".
			body string
		}{{
			name: "fresh server is healthy",
			do:   func() {},
			code: 200,
			body: `{"lastUpdated":"` + ts(0) + `","currentTime":"` + ts(0) + `","nodeEligible":true,"healthy":true}`,
		}, {
			name: "both families synced",
			do:   func() { hs.Updated(v4); hs.Updated(v6) },
			code: 200,
			body: `{"lastUpdated":"` + ts(0) + `","currentTime":"` + ts(0) + `","nodeEligible":true,"healthy":true,` +
				`"status":{"IPv4":{"lastUpdated":"` + ts(0) + `","healthy":true},"IPv6":{"lastUpdated":"` + ts(0) + `","healthy":true}}}`,
		}, {
			name: "no update queued: healthy however long since the last sync",
			do:   func() { time.Sleep(25 * time.Second) },
			code: 200,
			body: `{"lastUpdated":"` + ts(25*time.Second) + `","currentTime":"` + ts(25*time.Second) + `","nodeEligible":true,"healthy":true,` +
				`"status":{"IPv4":{"lastUpdated":"` + ts(0) + `","healthy":true},"IPv6":{"lastUpdated":"` + ts(0) + `","healthy":true}}}`,
		}, {
			name: "IPv4 update queued, just under the timeout",
			do:   func() { hs.QueuedUpdate(v4); time.Sleep(9*time.Second + 999*time.Millisecond) },
			code: 200,
			body: `{"lastUpdated":"` + ts(34999*time.Millisecond) + `","currentTime":"` + ts(34999*time.Millisecond) + `","nodeEligible":true,"healthy":true,` +
				`"status":{"IPv4":{"lastUpdated":"` + ts(0) + `","healthy":true},"IPv6":{"lastUpdated":"` + ts(0) + `","healthy":true}}}`,
		}, {
			name: "IPv4 update pending for exactly the timeout: unhealthy, lastUpdated is the real last sync",
			do:   func() { time.Sleep(time.Millisecond) },
			code: 503,
			body: `{"lastUpdated":"` + ts(0) + `","currentTime":"` + ts(35*time.Second) + `","nodeEligible":true,"healthy":false,` +
				`"status":{"IPv4":{"lastUpdated":"` + ts(0) + `","healthy":false},"IPv6":{"lastUpdated":"` + ts(0) + `","healthy":true}}}`,
		}, {
			name: "a later QueuedUpdate does not reset the oldest pending time",
			do:   func() { hs.QueuedUpdate(v4) },
			code: 503,
			body: `{"lastUpdated":"` + ts(0) + `","currentTime":"` + ts(35*time.Second) + `","nodeEligible":true,"healthy":false,` +
				`"status":{"IPv4":{"lastUpdated":"` + ts(0) + `","healthy":false},"IPv6":{"lastUpdated":"` + ts(0) + `","healthy":true}}}`,
		}, {
			name: "IPv4 synced: healthy again",
			do:   func() { hs.Updated(v4) },
			code: 200,
			body: `{"lastUpdated":"` + ts(35*time.Second) + `","currentTime":"` + ts(35*time.Second) + `","nodeEligible":true,"healthy":true,` +
				`"status":{"IPv4":{"lastUpdated":"` + ts(35*time.Second) + `","healthy":true},"IPv6":{"lastUpdated":"` + ts(0) + `","healthy":true}}}`,
		}, {
			name: "IPv6 late; an IPv4 sync does not help",
			do:   func() { hs.QueuedUpdate(v6); time.Sleep(10 * time.Second); hs.Updated(v4) },
			code: 503,
			body: `{"lastUpdated":"` + ts(45*time.Second) + `","currentTime":"` + ts(45*time.Second) + `","nodeEligible":true,"healthy":false,` +
				`"status":{"IPv4":{"lastUpdated":"` + ts(45*time.Second) + `","healthy":true},"IPv6":{"lastUpdated":"` + ts(0) + `","healthy":false}}}`,
		}, {
			name: "IPv6 synced",
			do:   func() { time.Sleep(time.Second); hs.Updated(v6) },
			code: 200,
			body: `{"lastUpdated":"` + ts(46*time.Second) + `","currentTime":"` + ts(46*time.Second) + `","nodeEligible":true,"healthy":true,` +
				`"status":{"IPv4":{"lastUpdated":"` + ts(45*time.Second) + `","healthy":true},"IPv6":{"lastUpdated":"` + ts(46*time.Second) + `","healthy":true}}}`,
		}, {
			name: "both late: unhealthy until both sync",
			do:   func() { hs.QueuedUpdate(v4); hs.QueuedUpdate(v6); time.Sleep(time.Minute); hs.Updated(v4) },
			code: 503,
			body: `{"lastUpdated":"` + ts(106*time.Second) + `","currentTime":"` + ts(106*time.Second) + `","nodeEligible":true,"healthy":false,` +
				`"status":{"IPv4":{"lastUpdated":"` + ts(106*time.Second) + `","healthy":true},"IPv6":{"lastUpdated":"` + ts(46*time.Second) + `","healthy":false}}}`,
		}}

		want := map[string]map[int]int{"healthz": {}, "livez": {}}
		for _, step := range steps {
			step.do()
			for _, path := range []string{"/healthz", "/livez"} {
				body := step.body
				if path == "/livez" {
					body = strings.Replace(body, `"nodeEligible":true,`, "", 1)
				}
				got := serve(h, path)
				if got.code != step.code || got.body != body {
					t.Errorf("%s: GET %s = %d %s\nwant %d %s", step.name, path, got.code, got.body, step.code, body)
				}
				checkJSONHeaders(t, got.headers)
				want[path[1:]][step.code]++
			}
			if got := hs.Health().Healthy; got != (step.code == 200) {
				t.Errorf("%s: Health().Healthy = %v", step.name, got)
			}
		}
		if diff := cmp.Diff(want, map[string]map[int]int{"healthz": probes.healthz, "livez": probes.livez}); diff != "" {
			t.Errorf("probe counts (-want +got):\n%s", diff)
		}
	})
}

// TestProxyHealthStartingUp: a family that has never synced is healthy however
// long its queued update waits (kube-proxy: healthy while starting up).
func TestProxyHealthStartingUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := NewProxyHealthServer(ProxyHealthConfig{HealthTimeout: time.Second})
		hs.QueuedUpdate(v1.IPv4Protocol)
		time.Sleep(time.Hour)
		if !hs.Health().Healthy {
			t.Fatalf("never-synced family with a queued update is unhealthy; want healthy")
		}
		hs.Updated(v1.IPv4Protocol)
		hs.QueuedUpdate(v1.IPv4Protocol)
		time.Sleep(time.Second)
		if hs.Health().Healthy {
			t.Fatalf("synced family late by the timeout is healthy; want unhealthy")
		}
	})
}

func TestHealthzNodeEligibility(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eligible := false
		probes := newFakeProbes()
		hs := NewProxyHealthServer(ProxyHealthConfig{
			NodeEligible: func() bool { return eligible },
			Probes:       probes,
		})
		h := hs.Handler()

		// Unhealthy, so lastUpdated is the real one: zero, never synced.
		got := serve(h, "/healthz")
		want := `{"lastUpdated":"0001-01-01T00:00:00Z","currentTime":"` + ts(0) + `","nodeEligible":false,"healthy":true}`
		if got.code != 503 || got.body != want {
			t.Errorf("ineligible node: /healthz = %d %s\nwant 503 %s", got.code, got.body, want)
		}
		// /livez ignores eligibility: healthy, lastUpdated is now.
		got = serve(h, "/livez")
		want = `{"lastUpdated":"` + ts(0) + `","currentTime":"` + ts(0) + `","healthy":true}`
		if got.code != 200 || got.body != want {
			t.Errorf("ineligible node: /livez = %d %s\nwant 200 %s", got.code, got.body, want)
		}

		eligible = true
		if got := serve(h, "/healthz"); got.code != 200 {
			t.Errorf("eligible node: /healthz = %d, want 200", got.code)
		}
		wantCounts := map[string]map[int]int{"healthz": {503: 1, 200: 1}, "livez": {200: 1}}
		if diff := cmp.Diff(wantCounts, map[string]map[int]int{"healthz": probes.healthz, "livez": probes.livez}); diff != "" {
			t.Errorf("probe counts (-want +got):\n%s", diff)
		}
	})
}

func TestNodeEligible(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *model.Node
		want bool
	}{
		{"unknown node", nil, false},
		{"plain node", &model.Node{Name: "node1"}, true},
		{"other taints", &model.Node{Name: "node1", TaintKeys: []string{"node.kubernetes.io/unschedulable", "ToBeDeleted"}}, true},
		{"autoscaler deletion taint", &model.Node{Name: "node1", TaintKeys: []string{"other", ToBeDeletedTaint}}, false},
		{"being deleted", &model.Node{Name: "node1", Terminating: true}, false},
	} {
		if got := NodeEligible(tc.node); got != tc.want {
			t.Errorf("%s: NodeEligible = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestProxyHealthRun(t *testing.T) {
	ln := newLoopbackListener()
	hs := NewProxyHealthServer(ProxyHealthConfig{
		Addr:     "127.0.0.1:10256",
		Listener: ln,
	})
	stop := runInBackground(t, hs.Run)
	addr := ln.waitAddr(t, "127.0.0.1:10256")
	if got, want := ln.Calls(), []string{"tcp 127.0.0.1:10256"}; !cmp.Equal(got, want) {
		t.Errorf("listen calls = %q, want %q", got, want)
	}

	for _, path := range []string{"/healthz", "/livez"} {
		got := mustGet(t, addr, path)
		if got.code != 200 {
			t.Errorf("GET %s = %d %s, want 200", path, got.code, got.body)
		}
		checkJSONHeaders(t, got.headers)
	}
	if got := mustGet(t, addr, "/metrics"); got.code != 404 {
		t.Errorf("GET /metrics = %d, want 404", got.code)
	}

	stop()
	waitRefused(t, addr)
}

func TestProxyHealthRunBindError(t *testing.T) {
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	hs := NewProxyHealthServer(ProxyHealthConfig{Addr: busy.Addr().String()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = hs.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), busy.Addr().String()) {
		t.Fatalf("Run on a busy port = %v, want an error naming %s", err, busy.Addr())
	}
}

func TestProxyHealthDefaults(t *testing.T) {
	hs := NewProxyHealthServer(ProxyHealthConfig{})
	if hs.addr != "0.0.0.0:10256" || hs.healthTimeout != time.Minute {
		t.Errorf("defaults: addr %q timeout %v, want 0.0.0.0:10256 and 1m", hs.addr, hs.healthTimeout)
	}
	if !hs.NodeEligible() {
		t.Errorf("NodeEligible without a NodeEligible func = false, want true")
	}
}
