package proxy_test

import (
	"net"
	"testing"
	"time"
)

// TestUDPConntrackCleanup: a UDP client keeps sending from one socket while
// its backend pod is replaced (old Pod gone from the manifests, its server
// stopped; new Pod added). Its flow stays alive in conntrack (the client
// sends every 100ms, well within the UDP timeout), so without the proxy's
// stale-flow cleanup every datagram would still be DNATed to the dead pod.
// After the sync the same socket reaches the new pod.
func TestUDPConntrackCleanup(t *testing.T) {
	c := newCluster(t)
	old, repl := c.addPod("dns-old", 11), c.addPod("dns-new", 12)
	client := c.addPod("client", 20)
	labels := map[string]string{"app": "dns"}
	svc := newService("dns", []string{"10.96.0.140"}, udpPort(53))
	svc.Spec.Selector = labels
	c.apply(svc, podObject(old, nodeName, labels, true))
	proxy := c.startProxy()

	var conn net.Conn
	eventually(t, 10*time.Second, "UDP flow to dns-old", func() (bool, string) {
		if conn == nil {
			var err error
			if conn, err = dialIn(client.ns, "udp", "10.96.0.140:53", client.ip, time.Second); err != nil {
				return false, err.Error()
			}
		}
		r, err := udpExchange(conn, 300*time.Millisecond)
		if err != nil {
			// Before the first sync the datagram went nowhere and left an
			// un-NATed flow; start over on a fresh socket.
			conn.Close()
			conn = nil
			return false, err.Error()
		}
		return r.Pod == old.name, r.String()
	})
	defer conn.Close()
	local := conn.LocalAddr().String()

	// The old pod dies and is replaced.
	old.echo.close()
	m := proxy.mark()
	c.apply(svc, podObject(repl, nodeName, labels, true))
	start := time.Now()
	eventually(t, 5*time.Second, "the same UDP socket reaching dns-new", func() (bool, string) {
		r, err := udpExchange(conn, 100*time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		return r.Pod == repl.name, r.String()
	})
	proxy.waitReload(t, m)
	t.Logf("socket %s reached %s %v after the manifest change", local, repl.name, time.Since(start).Round(time.Millisecond))
	if conn.LocalAddr().String() != local {
		t.Fatalf("socket changed from %s to %s", local, conn.LocalAddr())
	}
}
