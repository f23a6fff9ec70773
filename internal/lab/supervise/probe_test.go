package supervise

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestThreshold(t *testing.T) {
	type step struct {
		ok            bool
		state, change bool
	}
	for _, tc := range []struct {
		name  string
		th    Threshold
		steps []step
	}{
		{"one success decides", Threshold{Success: 1, Failure: 3}, []step{
			{ok: true, state: true, change: true}, {ok: true, state: true},
		}},
		{"three failures in a row flip it", Threshold{Success: 1, Failure: 3}, []step{
			{ok: true, state: true, change: true},
			{ok: false, state: true}, {ok: false, state: true},
			{ok: true, state: true}, // the run is broken
			{ok: false, state: true}, {ok: false, state: true}, {ok: false, state: false, change: true},
			{ok: false, state: false},
			{ok: true, state: true, change: true},
		}},
		{"failures from the start", Threshold{Success: 1, Failure: 3}, []step{
			{ok: false}, {ok: false}, {ok: false, state: false, change: true}, {ok: false},
		}},
		{"two successes needed", Threshold{Success: 2, Failure: 1}, []step{
			{ok: true}, {ok: false, change: true}, {ok: true}, {ok: true, state: true, change: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := tc.th
			for i, s := range tc.steps {
				state, changed := th.Observe(s.ok)
				if state != s.state || changed != s.change {
					t.Fatalf("result %d (%v): state %v changed %v, want %v %v", i+1, s.ok, state, changed, s.state, s.change)
				}
			}
		})
	}
}

func TestThresholdReset(t *testing.T) {
	th := Threshold{Success: 1, Failure: 3}
	th.Observe(true)
	th.Reset(false)
	if s, known := th.State(); s || !known {
		t.Fatalf("after Reset(false): state %v known %v", s, known)
	}
	if s, changed := th.Observe(true); !s || !changed {
		t.Fatalf("a success after Reset(false): state %v changed %v, want true true", s, changed)
	}
}

func TestParseProbe(t *testing.T) {
	for _, s := range []string{"http://127.0.0.1:10256/healthz", "tcp://192.168.1.2:80"} {
		p, err := ParseProbe(s)
		if err != nil || p.String() != s {
			t.Errorf("ParseProbe(%q) = %v, %v", s, p, err)
		}
	}
	for _, s := range []string{"https://127.0.0.1:1/", "tcp://127.0.0.1", "tcp://127.0.0.1:80/x", "udp://1.2.3.4:53", "127.0.0.1:80"} {
		if _, err := ParseProbe(s); err == nil {
			t.Errorf("ParseProbe(%q): no error", s)
		}
	}
}

// HTTP probes pass on 2xx and 3xx, fail on other statuses, refused
// connections and answers slower than the timeout; TCP probes pass when a
// connection is accepted. All on loopback.
func TestProbesOnLoopback(t *testing.T) {
	status := http.StatusOK
	slow := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-slow
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	defer close(slow)
	ctx := context.Background()
	check := func(s string, timeout time.Duration) error {
		t.Helper()
		p, err := ParseProbe(s)
		if err != nil {
			t.Fatal(err)
		}
		return p.Check(ctx, timeout)
	}
	for _, tc := range []struct {
		status int
		ok     bool
	}{{200, true}, {302, true}, {399, true}, {400, false}, {503, false}} {
		status = tc.status
		if err := check(srv.URL+"/healthz", time.Second); (err == nil) != tc.ok {
			t.Errorf("HTTP %d: err %v, want pass %v", tc.status, err, tc.ok)
		}
	}
	status = 200
	start := time.Now()
	if err := check(srv.URL+"/slow", 200*time.Millisecond); err == nil {
		t.Error("a server that does not answer passed")
	} else if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the probe of a silent server took %v, want about its 200ms timeout", d)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if err := check("tcp://"+host, time.Second); err != nil {
		t.Errorf("tcp probe of a listening port: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	if err := check("tcp://"+closed, time.Second); err == nil {
		t.Error("tcp probe of a closed port passed")
	}
	if err := check("http://"+closed+"/healthz", time.Second); err == nil {
		t.Error("http probe of a closed port passed")
	}
}
