package proxy_test

import (
	"strings"
	"testing"
	"time"
)

// TestDriftRepair: someone flushes or deletes the proxy's tables (the main
// one and its NAT shard) behind its back; the proxy notices (nftables generation) and repairs it, and traffic
// works again within 3s, without a restart.
func TestDriftRepair(t *testing.T) {
	for _, tc := range []struct {
		name string
		nft  []string
	}{
		{"flush-table", []string{"nft", "flush", "table", "ip", "svcnet-nat-00"}},
		{"delete-tables", []string{"nft", "delete table ip svcnet; delete table ip svcnet-nat-00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			a := c.addPod("pod-a", 11)
			client := c.addPod("client", 20)
			svc := newService("web", []string{"10.96.0.160"}, tcpPort(80))
			c.apply(svc, v4(svc, local(a)))
			proxy := c.startProxy()
			const addr = "10.96.0.160:80"
			eventuallyAnswered(t, client.ns, "tcp", addr, a.name)

			m := proxy.mark()
			c.mustNode(tc.nft...)
			start := time.Now()
			deadline := start.Add(3 * time.Second)
			for {
				_, err := tcpReq(client.ns, addr, 300*time.Millisecond)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("traffic still failing 3s after %q: %v", strings.Join(tc.nft, " "), err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("traffic back %v after %q", time.Since(start).Round(time.Millisecond), strings.Join(tc.nft, " "))
			if !proxy.running() || len(c.proxies) != 1 {
				t.Fatalf("proxy restarted or exited: %s", proxy.describe())
			}
			i := proxy.waitLog(t, 3*time.Second, m, reSyncComplete)
			if line := proxy.lines()[i]; !strings.Contains(line, "drift=true") {
				t.Errorf("repair sync %q does not report drift=true", line)
			}
			if m := c.mustNode("nft", "list", "map", "ip", "svcnet-nat-00", "service-ips"); !strings.Contains(m, "10.96.0.160 . tcp . 80") {
				t.Errorf("service-ips after repair lacks the ClusterIP:\n%s", m)
			}
		})
	}
}
