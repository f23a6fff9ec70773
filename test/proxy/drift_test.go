package proxy_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDriftRepair: someone breaks the proxy's kernel state behind its back
// (planeView.drifts: on nftables, flushes or deletes its tables; on
// iptables, flushes KUBE-SERVICES, or flushes and deletes every chain as a
// firewall reset does); the proxy notices and repairs it, and traffic works
// again within 3s, without a restart.
func TestDriftRepair(t *testing.T) {
	for _, name := range driftNames() {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			a := c.addPod("pod-a", 11)
			client := c.addPod("client", 20)
			svc := newService("web", []string{"10.96.0.160"}, tcpPort(80))
			c.apply(svc, v4(svc, local(a)))
			proxy := c.startProxy()
			const addr = "10.96.0.160:80"
			eventuallyAnswered(t, client.ns, "tcp", addr, a.name)

			m := proxy.mark()
			argv := c.plane().drift(name)
			c.mustNode(argv...)
			start := time.Now()
			deadline := start.Add(3 * time.Second)
			for {
				_, err := tcpReq(client.ns, addr, 300*time.Millisecond)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("traffic still failing 3s after %q: %v", strings.Join(argv, " "), err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("traffic back %v after %q", time.Since(start).Round(time.Millisecond), strings.Join(argv, " "))
			if !proxy.running() || len(c.proxies) != 1 {
				t.Fatalf("proxy restarted or exited: %s", proxy.describe())
			}
			// The repair is the first full sync after the drift (a partial
			// sync of the sync period may come before it, rate-limited
			// verification waiting): it must report what it found.
			i := proxy.waitLog(t, 3*time.Second, m, reFullSyncComplete)
			if line := proxy.lines()[i]; !strings.Contains(line, "drift=true") {
				t.Errorf("repair sync %q does not report drift=true", line)
			}
			if fronts, state := c.plane().frontends(); !slices.Contains(fronts, frontendKey("tcp", netip.MustParseAddr("10.96.0.160"), 80)) {
				t.Errorf("the repaired state lacks the ClusterIP's frontend:\n%s", state)
			}
		})
	}
}
