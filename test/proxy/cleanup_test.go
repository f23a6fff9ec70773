package proxy_test

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCleanup: a stopped proxy leaves its tables (a restart adopts them);
// `svcnet proxy --cleanup` removes both, leaves other tables alone, exits 0,
// and does so again when there is nothing left.
func TestCleanup(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	svc := newService("web", []string{"10.96.0.170", "fd00:96::170"}, tcpPort(80))
	c.apply(svc, v4(svc, local(a)))
	proxy := c.startProxy()
	c.mustNode("nft", "add", "table", "ip", "bystander")

	tables := func() string { return c.mustNode("nft", "list", "tables") }
	for _, want := range []string{"table ip svcnet\n", "table ip6 svcnet\n", "table ip svcnet-nat-00\n", "table ip6 svcnet-nat-00\n"} {
		if got := tables(); !strings.Contains(got, want) {
			t.Fatalf("running proxy: no %q in:\n%s", want, got)
		}
	}
	if err := proxy.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("proxy exit after SIGTERM: %v", err)
	}
	if got := tables(); !strings.Contains(got, "table ip svcnet") {
		t.Fatalf("a stopped proxy removed its table (a restart must adopt it):\n%s", got)
	}

	for i := 1; i <= 2; i++ {
		p := c.spawn("proxy", "--cleanup", "-v", "2")
		select {
		case <-p.Done():
		case <-time.After(15 * time.Second):
			t.Fatalf("--cleanup run %d did not exit within 15s", i)
		}
		if p.Err() != nil {
			t.Fatalf("--cleanup run %d: %v\n%s", i, p.Err(), p.log.String())
		}
		got := tables()
		if strings.Contains(got, "svcnet") {
			t.Errorf("after --cleanup run %d, tables:\n%s", i, got)
		}
		if !strings.Contains(got, "table ip bystander") {
			t.Errorf("--cleanup run %d removed another table:\n%s", i, got)
		}
	}
}
