package members

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// dropConn is a real socket whose writes can be made to vanish, which is what
// the network sees when the process behind it is killed (no leave datagram).
// It keeps a copy of every datagram it sends, as someone on the wire could.
type dropConn struct {
	net.PacketConn
	dead atomic.Bool

	mu   sync.Mutex
	sent [][]byte
}

func (c *dropConn) record(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, bytes.Clone(b))
}

// recorded returns a copy of what was sent so far.
func (c *dropConn) recorded() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}

func (c *dropConn) WriteTo(b []byte, to net.Addr) (int, error) {
	if c.dead.Load() {
		return len(b), nil
	}
	c.record(b)
	return c.PacketConn.WriteTo(b, to)
}

func (c *dropConn) WriteMsgUDPAddrPort(b, oob []byte, to netip.AddrPort) (int, int, error) {
	if c.dead.Load() {
		return len(b), len(oob), nil
	}
	c.record(b)
	return c.PacketConn.(msgWriter).WriteMsgUDPAddrPort(b, oob, to)
}

// syncCounter counts Config.Rejected calls from Run's receiving goroutine.
type syncCounter struct {
	mu sync.Mutex
	c  map[string]int
}

func (s *syncCounter) count(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		s.c = map[string]int{}
	}
	s.c[reason]++
}

func (s *syncCounter) get(reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c[reason]
}

func nsRun(t *testing.T, ns *netns.NS, argv ...string) {
	t.Helper()
	if out, err := ns.Command(argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// waitOperUp waits (bounded by 5 s) until link is operationally up in ns. A
// veth end brought up before its peer gets its carrier later, and the kernel
// attaches its transmit queue only when the (global, rate-limited) link-watch
// work handles that carrier event, up to a second later on a busy host: until
// then what it sends is dropped without an error. The operational state is
// set by the same work, so once it reads up, the link carries traffic.
func waitOperUp(t *testing.T, ns *netns.NS, link string) {
	t.Helper()
	var state netlink.LinkOperState
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := ns.Do(func() error {
			l, err := netlink.LinkByName(link)
			if err == nil {
				state = l.Attrs().OperState
			}
			return err
		}); err != nil {
			t.Fatalf("%s in %s: %v", link, ns.Name(), err)
		}
		if state == netlink.OperUp {
			return
		}
	}
	t.Fatalf("%s in %s: operational state %s after 5s, want up", link, ns.Name(), state)
}

// warmPath sends datagrams from fromAddr in from to toAddr in to until one
// arrives (bounded by 5 s), so that the neighbour entries on the way exist:
// a timing measured afterwards is the speakers', not a neighbour
// resolution's, which may wait a 1 s retransmit on a loaded host.
func warmPath(t *testing.T, from, to *netns.NS, fromAddr, toAddr string) {
	t.Helper()
	rx := listenIn(t, to, net.JoinHostPort(toAddr, "0"))
	tx := listenIn(t, from, net.JoinHostPort(fromAddr, "0"))
	buf := make([]byte, 16)
	for range 50 {
		if _, err := tx.WriteTo([]byte("warm"), rx.LocalAddr()); err != nil {
			t.Fatalf("warm %s -> %s: %v", fromAddr, toAddr, err)
		}
		_ = rx.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, _, err := rx.ReadFrom(buf); err == nil {
			return
		}
	}
	t.Fatalf("no datagram from %s reached %s in 5s", fromAddr, toAddr)
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
// veth pair, with real signed UDP heartbeats and the default timing, over IPv4
// and IPv6: discovery, failure detection after a kill (the figure is logged), a
// restart, a clean stop; and forgers that change nothing: a stranger claiming
// a node's name, and datagrams from node1's own address that are unsigned,
// signed with a wrong key, or recordings of node1's genuine ones, claiming it
// left while it is alive or is alive after it was killed.
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
			waitOperUp(t, n1, "eth0")
			waitOperUp(t, n2, "eth0")
			warmPath(t, n1, n2, fam.a1, fam.a2)
			warmPath(t, n2, n1, fam.a2, fam.a1)
			a1, a2, a3 := netip.MustParseAddr(fam.a1), netip.MustParseAddr(fam.a2), netip.MustParseAddr(fam.a3)
			conn1 := &dropConn{PacketConn: listenIn(t, n1, ":7947")}
			conn2 := listenIn(t, n2, ":7947")
			var rejected syncCounter
			newNode := func(name string, peers map[string][]netip.Addr) (*Members, *logSink) {
				log := &logSink{}
				t.Cleanup(func() {
					if t.Failed() {
						for _, l := range log.Lines() {
							t.Log(name, l)
						}
					}
				})
				cfg := Config{NodeName: name, Logger: log.logger(), Keys: testKeys}
				if name == "node2" {
					cfg.Rejected = rejected.count
				}
				m, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				m.SetPeers(peers)
				m.SetReady(true)
				return m, log
			}
			peers := map[string][]netip.Addr{"node1": {a1}, "node2": {a2}, "node3": {a3}}
			m1, _ := newNode("node1", peers)
			m2, log2 := newNode("node2", peers)
			interval, timeout := m2.Interval(), m2.Timeout()

			started := time.Now()
			stop1 := runIn(t, m1, conn1)
			runIn(t, m2, conn2)
			waitAlive(t, m2, "node1", true, 3*interval)
			waitAlive(t, m1, "node2", true, 3*interval)
			t.Logf("both peers alive %s after start", time.Since(started).Round(time.Microsecond))

			// The forgers: a stranger on the node network, and an impostor
			// sending from node1's own address (as a raw socket could).
			stranger := listenIn(t, n1, net.JoinHostPort(fam.stranger, "0"))
			impostor := listenIn(t, n1, net.JoinHostPort(fam.a1, "0"))
			to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(a2, DefaultPort))
			send := func(from net.PacketConn, pkt []byte) {
				if _, err := from.WriteTo(pkt, to); err != nil {
					t.Fatalf("forged datagram: %v", err)
				}
			}
			forged := func(k kind, name string, seq uint64, keys *Keyring) []byte {
				now := time.Now().UnixNano()
				return encode(nil, message{kind: k, name: name, incarnation: now, seq: seq, ready: true, stamp: now}, keys)
			}
			want := map[string]int{}
			// forgeAll sends every kind of forgery of kind k naming node1 (and
			// node3 from the stranger) and the recordings of node1's datagrams.
			forgeAll := func(k kind, seq uint64) {
				send(stranger, forged(k, "node1", seq, testKeys))
				send(stranger, forged(k, "node3", seq, testKeys))
				want[RejectWrongSource] += 2
				send(impostor, forged(k, "node1", seq, nil))
				want[RejectUnsigned]++
				send(impostor, forged(k, "node1", seq, otherKeys))
				want[RejectBadSignature]++
				for _, pkt := range conn1.recorded() {
					send(impostor, pkt)
					want[RejectReplayed]++
				}
			}
			waitCounted := func() {
				t.Helper()
				for range 200 {
					done := true
					for r, n := range want {
						done = done && rejected.get(r) >= n
					}
					if done {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				for r, n := range want {
					if got := rejected.get(r); got != n {
						t.Errorf("node2 counted %d rejections %s, want %d", got, r, n)
					}
				}
			}

			// node1 alive: forged leaves change nothing.
			for i := range 3 {
				forgeAll(kindLeave, uint64(1<<40+i))
				time.Sleep(interval / 2)
			}
			waitCounted()
			if !m2.Alive()["node1"] || log2.count(`"peer dead"`) > 0 {
				t.Fatalf("forged leaves counted: alive %v, log %q", m2.Alive(), log2.Lines())
			}
			t.Logf("forged leaves refused: %v", want)

			// Kill node1: its datagrams stop, with no leave.
			conn1.dead.Store(true)
			killed := time.Now()
			if err := stop1(); err != nil {
				t.Fatal(err)
			}
			forgeAll(kindHeartbeat, 1<<41)
			waitAlive(t, m2, "node1", false, timeout+time.Second)
			detect := time.Since(killed)
			t.Logf("killed node1 declared dead %s after the kill (Timeout %s, Interval %s)", detect.Round(time.Millisecond), timeout, interval)
			if detect > timeout+interval {
				t.Errorf("detection took %s, want at most Timeout+Interval = %s", detect, timeout+interval)
			}
			for i := range 3 {
				forgeAll(kindHeartbeat, uint64(1<<42+i))
				time.Sleep(interval)
				if alive := m2.Alive(); alive["node1"] || alive["node3"] {
					t.Fatalf("forged heartbeats counted: alive %v", alive)
				}
			}
			waitCounted()
			if n := log2.count(`"peer alive"`, `"node"="node1"`); n != 1 {
				t.Fatalf("node1 came alive %d times at node2, want once (its start): %q", n, log2.Lines())
			}

			// Restart node1 as a new process on the same socket: alive at once.
			conn1.dead.Store(false)
			m1b, _ := newNode("node1", peers)
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
