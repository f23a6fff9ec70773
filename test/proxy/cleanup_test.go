package proxy_test

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCleanup: a stopped proxy leaves its kernel state (a restart adopts
// it); `svcnet proxy --cleanup` removes all of it, leaves another agent's
// state alone, exits 0, and does so again when there is nothing left. The
// state is the plane's (planeView): nftables tables, or iptables chains and
// the jumps to them, or the eBPF plane's tables and pins. --cleanup gets
// the plane's flags, which name the eBPF plane's cgroup and pins.
func TestCleanup(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	svc := newService("web", []string{"10.96.0.170", "fd00:96::170"}, tcpPort(80))
	c.apply(svc, v4(svc, local(a)))
	proxy := c.startProxy()
	view := c.plane()
	view.addBystander()

	running := view.objects()
	for _, want := range view.wantRunning() {
		if !slices.Contains(running, want) {
			t.Fatalf("running proxy: no %q in:\n%s", want, strings.Join(running, "\n"))
		}
	}
	if err := proxy.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("proxy exit after SIGTERM: %v", err)
	}
	if got := view.objects(); !slices.Equal(got, running) {
		t.Fatalf("a stopped proxy changed its kernel state (a restart must adopt it):\n%s\nwas:\n%s",
			strings.Join(got, "\n"), strings.Join(running, "\n"))
	}

	for i := 1; i <= 2; i++ {
		p := c.spawn(append([]string{"proxy", "--cleanup", "-v", "2"}, c.planeArgs()...)...)
		select {
		case <-p.Done():
		case <-time.After(15 * time.Second):
			t.Fatalf("--cleanup run %d did not exit within 15s", i)
		}
		if p.Err() != nil {
			t.Fatalf("--cleanup run %d: %v\n%s", i, p.Err(), p.log.String())
		}
		if got := view.objects(); len(got) > 0 {
			t.Errorf("after --cleanup run %d, left:\n%s", i, strings.Join(got, "\n"))
		}
		if ok, state := view.bystander(); !ok {
			t.Errorf("--cleanup run %d removed another agent's state:\n%s", i, state)
		}
	}
}
