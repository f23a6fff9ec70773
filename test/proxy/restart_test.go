package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestRestartWithoutFailedRequest: a client loop (TCP connect, read, close;
// 20 a second, 120 requests) runs while the proxy is stopped with SIGTERM and
// restarted, then killed with SIGKILL and restarted. The rules outlive the
// process, so no request fails, and each new process adopts the table it
// finds: its first (full) sync applies 0 operations.
//
// On the userspace plane traffic does not outlive the process
// (restartKeepsTraffic): there requests may fail only while no process
// serves them, from the signal until the new process's first sync has
// completed, and every other request is answered; a request that fails
// there is told so at once, never left to time out: refused at a closed
// proxy port, reset by a listener that closed with it queued, or closed
// unanswered by the old process as it ended. That sync is full and the new
// process's proxy ports serve the ClusterIP.
func TestRestartWithoutFailedRequest(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	client := c.addPod("client", 20)
	svc := newService("steady", []string{"10.96.0.150"}, tcpPort(80))
	c.apply(svc, v4(svc, local(a), remote(b)))
	cur := c.startProxy()
	const addr = "10.96.0.150:80"
	eventuallyAnswered(t, client.ns, "tcp", addr)

	// request is one request of the loop: when it ran and how it ended.
	type request struct {
		start, end time.Time
		err        error
	}
	const total = 120
	var (
		count   atomic.Int64
		mu      sync.Mutex
		results []request
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		next := time.Now()
		for i := 0; i < total && ctx.Err() == nil; i++ {
			start := time.Now()
			_, err := tcpReq(client.ns, addr, time.Second)
			mu.Lock()
			results = append(results, request{start: start, end: time.Now(), err: err})
			mu.Unlock()
			count.Add(1)
			next = next.Add(50 * time.Millisecond)
			time.Sleep(time.Until(next)) // pacing, not synchronisation
		}
	}()
	waitCount := func(n int64) {
		t.Helper()
		eventually(t, 30*time.Second, fmt.Sprintf("%d requests sent", n), func() (bool, string) {
			return count.Load() >= n, fmt.Sprintf("%d sent", count.Load())
		})
	}

	// gaps are the times no proxy process served: from the signal until
	// the new process's first sync was seen complete.
	type gap struct{ from, to time.Time }
	var gaps []gap
	for _, step := range []struct {
		sig      syscall.Signal
		at       int64
		wantExit string // "" for exit status 0
	}{
		{syscall.SIGTERM, 20, ""},
		{syscall.SIGKILL, 60, "signal: killed"},
	} {
		waitCount(step.at)
		stopAt := time.Now()
		err := cur.stop(t, step.sig)
		var ee *exec.ExitError
		switch {
		case step.wantExit == "" && err != nil:
			t.Errorf("after %v: exit %v, want status 0", step.sig, err)
		case step.wantExit != "" && (!errors.As(err, &ee) || !strings.Contains(err.Error(), step.wantExit)):
			t.Errorf("after %v: exit %v, want %q", step.sig, err, step.wantExit)
		}
		// Some requests run with no proxy at all.
		waitCount(count.Load() + 5)
		t0 := time.Now()
		cur = c.spawn(c.proxyArgs()...)
		i := cur.waitLog(t, 15*time.Second, 0, reSyncComplete)
		gaps = append(gaps, gap{stopAt, time.Now()})
		line := cur.lines()[i]
		t.Logf("restarted after %v; first sync %v later: %s", step.sig, time.Since(t0).Round(time.Millisecond), line)
		switch {
		case restartKeepsTraffic():
			if ops := opsOf(t, line); ops != 0 || !strings.Contains(line, "full=true") {
				t.Errorf("first sync after %v restart: %q, want a full sync with ops=0 (table adopted as found)", step.sig, line)
			}
		case !strings.Contains(line, "full=true"):
			t.Errorf("first sync after %v restart: %q, want a full sync (the table replaced, redirecting to the new process's ports)", step.sig, line)
		default:
			if fronts, state := c.plane().frontends(); !slices.Contains(fronts, frontendKey("tcp", netip.MustParseAddr("10.96.0.150"), 80)) {
				t.Errorf("after the first sync of the %v restart the ClusterIP is not redirected to a port the new process listens on:\n%s", step.sig, state)
			}
		}
	}
	select {
	case <-loopDone:
	case <-ctx.Done():
		t.Fatal("client loop did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	if n := count.Load(); n != total {
		t.Errorf("client loop sent %d requests, want %d", n, total)
	}
	// unserved reports whether r failed as a request in a gap fails on a
	// plane whose traffic does not outlive the process: at once.
	unserved := func(r request) bool {
		return outcome(r.err) != "timeout" && slices.ContainsFunc(gaps, func(g gap) bool {
			return r.end.After(g.from) && r.start.Before(g.to)
		})
	}
	var failures, served []string
	for i, r := range results {
		if r.err == nil {
			continue
		}
		f := fmt.Sprintf("request %d at %s (%v): %v", i+1, r.start.Format("15:04:05.000"), r.end.Sub(r.start).Round(time.Millisecond), r.err)
		if !restartKeepsTraffic() && unserved(r) {
			served = append(served, f)
			continue
		}
		failures = append(failures, f)
	}
	if len(served) > 0 {
		t.Logf("%d of %d requests failed while no proxy process served them (the userspace plane's restart):\n%s", len(served), total, strings.Join(served, "\n"))
	}
	if len(failures) > 0 {
		for _, g := range gaps {
			t.Logf("no proxy process from %s to %s", g.from.Format("15:04:05.000"), g.to.Format("15:04:05.000"))
		}
		t.Errorf("%d of %d requests failed across the restarts:\n%s", len(failures), total, strings.Join(failures, "\n"))
	}
}
