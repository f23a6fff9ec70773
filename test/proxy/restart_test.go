package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
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
func TestRestartWithoutFailedRequest(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	client := c.addPod("client", 20)
	svc := newService("steady", []string{"10.96.0.150"}, tcpPort(80))
	c.apply(svc, v4(svc, local(a), remote(b)))
	cur := c.startProxy()
	const addr = "10.96.0.150:80"
	eventuallyAnswered(t, client.ns, "tcp", addr)

	const total = 120
	var (
		count    atomic.Int64
		mu       sync.Mutex
		failures []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		next := time.Now()
		for i := 0; i < total && ctx.Err() == nil; i++ {
			if _, err := tcpReq(client.ns, addr, time.Second); err != nil {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("request %d at %s: %v", i+1, time.Now().Format("15:04:05.000"), err))
				mu.Unlock()
			}
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

	for _, step := range []struct {
		sig      syscall.Signal
		at       int64
		wantExit string // "" for exit status 0
	}{
		{syscall.SIGTERM, 20, ""},
		{syscall.SIGKILL, 60, "signal: killed"},
	} {
		waitCount(step.at)
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
		line := cur.lines()[i]
		t.Logf("restarted after %v; first sync %v later: %s", step.sig, time.Since(t0).Round(time.Millisecond), line)
		if ops := opsOf(t, line); ops != 0 || !strings.Contains(line, "full=true") {
			t.Errorf("first sync after %v restart: %q, want a full sync with ops=0 (table adopted as found)", step.sig, line)
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
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed across the restarts:\n%s", len(failures), total, strings.Join(failures, "\n"))
	}
}
