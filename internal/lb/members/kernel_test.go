package members

import (
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// dropConn is a real socket whose writes can be made to vanish, which is what
// the network sees when the process behind it is killed (no leave datagram).
type dropConn struct {
	net.PacketConn
	dead atomic.Bool
}

func (c *dropConn) WriteTo(b []byte, to net.Addr) (int, error) {
	if c.dead.Load() {
		return len(b), nil
	}
	return c.PacketConn.WriteTo(b, to)
}

func (c *dropConn) WriteMsgUDPAddrPort(b, oob []byte, to netip.AddrPort) (int, int, error) {
	if c.dead.Load() {
		return len(b), len(oob), nil
	}
	return c.PacketConn.(msgWriter).WriteMsgUDPAddrPort(b, oob, to)
}

func nsRun(t *testing.T, ns *netns.NS, argv ...string) {
	t.Helper()
	if out, err := ns.Command(argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// listenIn opens a UDP socket bound to laddr inside ns, closed when the test ends.
func listenIn(t *testing.T, ns *netns.NS, laddr string) net.PacketConn {
	t.Helper()
	var c net.PacketConn
	if err := ns.Do(func() (err error) {
		c, err = net.ListenPacket("udp", laddr)
		return err
	}); err != nil {
		t.Fatalf("listen %s: %v", laddr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestKernelHeartbeats runs two speakers in two network namespaces joined by a
// veth pair, with real UDP heartbeats and the default timing, over IPv4 and
// IPv6: discovery, failure detection after a kill (the figure is logged), a
// restart, a clean stop, and a stranger claiming a node's name.
func TestKernelHeartbeats(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, fam := range []struct {
		name, prefix, a1, a2, a3, stranger string
	}{
		{"IPv4", "/24", "172.26.236.177", "172.26.236.178", "172.26.236.179", "172.26.236.10"},
		{"IPv6", "/64", "fd00:26:236::177", "fd00:26:236::178", "fd00:26:236::179", "fd00:26:236::10"},
	} {
		t.Run(fam.name, func(t *testing.T) {
			// n1 holds the stranger's address first, so that the kernel would
			// pick it as the source: heartbeats must leave from node1's own.
			n1, n2 := netnstest.New(t, "mb1"), netnstest.New(t, "mb2")
			nsRun(t, n1, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", n2.Name())
			for _, x := range []struct {
				ns    *netns.NS
				addrs []string
			}{{n1, []string{fam.stranger, fam.a1}}, {n2, []string{fam.a2}}} {
				for _, a := range x.addrs {
					args := []string{"ip", "addr", "add", a + fam.prefix, "dev", "eth0"}
					if fam.name == "IPv6" {
						args = append(args, "nodad")
					}
					nsRun(t, x.ns, args...)
				}
				nsRun(t, x.ns, "ip", "link", "set", "eth0", "up")
			}
			a1, a2, a3 := netip.MustParseAddr(fam.a1), netip.MustParseAddr(fam.a2), netip.MustParseAddr(fam.a3)
			conn1 := &dropConn{PacketConn: listenIn(t, n1, ":7947")}
			conn2 := listenIn(t, n2, ":7947")
			newNode := func(name string, peers map[string][]netip.Addr) *Members {
				m, err := New(Config{NodeName: name, Logger: funcr.New(func(p, a string) { t.Log(name, a) }, funcr.Options{Verbosity: 4})})
				if err != nil {
					t.Fatal(err)
				}
				m.SetPeers(peers)
				m.SetReady(true)
				return m
			}
			peers := map[string][]netip.Addr{"node1": {a1}, "node2": {a2}, "node3": {a3}}
			m1, m2 := newNode("node1", peers), newNode("node2", peers)
			interval, timeout := m2.Interval(), m2.Timeout()

			started := time.Now()
			stop1 := runIn(t, m1, conn1)
			runIn(t, m2, conn2)
			waitAlive(t, m2, "node1", true, 3*interval)
			waitAlive(t, m1, "node2", true, 3*interval)
			t.Logf("both peers alive %s after start", time.Since(started).Round(time.Microsecond))

			// A stranger on the node network names node3 and node1 in datagrams
			// that would otherwise count; node2 must ignore them.
			stranger := listenIn(t, n1, net.JoinHostPort(fam.stranger, "0"))
			forge := func(name string, seq uint64) {
				to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(a2, DefaultPort))
				if _, err := stranger.WriteTo(hb(name, time.Now().UnixNano(), seq), to); err != nil {
					t.Fatalf("forged heartbeat: %v", err)
				}
			}

			// Kill node1: its datagrams stop, with no leave.
			conn1.dead.Store(true)
			killed := time.Now()
			if err := stop1(); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				forge("node1", uint64(i+1))
				forge("node3", uint64(i+1))
			}
			waitAlive(t, m2, "node1", false, timeout+time.Second)
			detect := time.Since(killed)
			t.Logf("killed node1 declared dead %s after the kill (Timeout %s, Interval %s)", detect.Round(time.Millisecond), timeout, interval)
			if detect > timeout+interval {
				t.Errorf("detection took %s, want at most Timeout+Interval = %s", detect, timeout+interval)
			}
			for i := range 3 {
				forge("node1", uint64(10+i))
				forge("node3", uint64(10+i))
				time.Sleep(interval)
				if alive := m2.Alive(); alive["node1"] || alive["node3"] {
					t.Fatalf("forged heartbeats from %s counted: alive %v", fam.stranger, alive)
				}
			}

			// Restart node1 as a new process on the same socket: alive at once.
			conn1.dead.Store(false)
			m1b := newNode("node1", peers)
			stop1b := runIn(t, m1b, conn1)
			back := waitAlive(t, m2, "node1", true, 3*interval)
			t.Logf("restarted node1 alive %s after its start", back.Round(time.Microsecond))
			if back > interval {
				t.Errorf("restart seen after %s, want within one Interval", back)
			}

			// Stop it cleanly: the leave datagram makes it dead at once.
			stopped := time.Now()
			if err := stop1b(); err != nil {
				t.Fatal(err)
			}
			waitAlive(t, m2, "node1", false, timeout+time.Second)
			gone := time.Since(stopped)
			t.Logf("cleanly stopped node1 dead %s after the stop", gone.Round(time.Microsecond))
			if gone > interval {
				t.Errorf("clean stop seen after %s, want within one Interval (leave datagram)", gone)
			}
		})
	}
}
