package speaker

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/svcnet/svcnet/internal/lb/announce"
	"github.com/svcnet/svcnet/internal/lb/members"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// speakerKeys is the heartbeat keyring every agent of these tests shares.
var speakerKeys = func() *members.Keyring {
	k, err := members.NewKeyring([]byte("speaker-test-key-0123456789"))
	if err != nil {
		panic(err)
	}
	return k
}()

// killableConn is a real socket whose writes can be made to vanish: what peers
// see when the process behind it is killed.
type killableConn struct {
	*net.UDPConn
	dead atomic.Bool
}

func (c *killableConn) WriteTo(b []byte, to net.Addr) (int, error) {
	if c.dead.Load() {
		return len(b), nil
	}
	return c.UDPConn.WriteTo(b, to)
}

func (c *killableConn) WriteMsgUDPAddrPort(b, oob []byte, to netip.AddrPort) (int, int, error) {
	if c.dead.Load() {
		return len(b), len(oob), nil
	}
	return c.UDPConn.WriteMsgUDPAddrPort(b, oob, to)
}

// agent is one node's members + speaker, as `svcnet proxy --announce l2` runs them.
type agent struct {
	ann  *announce.Fake
	stop func()
}

func startAgent(t *testing.T, name string, conn net.PacketConn, store *model.Store) *agent {
	t.Helper()
	log := funcr.New(func(prefix, args string) { t.Log(name, prefix, args) }, funcr.Options{})
	mem, err := members.New(members.Config{NodeName: name, Logger: log, Keys: speakerKeys})
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{ann: &announce.Fake{}}
	sp, err := New(Config{NodeName: name, IsDefault: true, Announcer: a.ann, Members: mem, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := mem.Run(ctx, conn); err != nil {
			t.Errorf("%s members: %v", name, err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := sp.Run(ctx, store); err != nil {
			t.Errorf("%s speaker: %v", name, err)
		}
	}()
	var once sync.Once
	a.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(a.stop)
	return a
}

func owns(a *agent, ip netip.Addr) bool { return slices.Contains(a.ann.Owned(), ip) }

// TestKernelFailover runs two nodes' agents (real heartbeats over a veth pair
// between two namespaces, default timing; the announcers are fakes) and kills
// the owner of an IP: the other node must take it over within a second (the
// figure is logged). The killed node then restarts: the survivor keeps the IP
// through the restart's warm-up and hands it back when the restarted node is
// ready.
func TestKernelFailover(t *testing.T) {
	netnstest.RequireRoot(t)
	n1, n2 := netnstest.New(t, "spk1"), netnstest.New(t, "spk2")
	run := func(ns *netns.NS, argv ...string) {
		t.Helper()
		if out, err := ns.Command(argv...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	run(n1, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", n2.Name())
	run(n1, "ip", "addr", "add", "172.26.236.177/24", "dev", "eth0")
	run(n2, "ip", "addr", "add", "172.26.236.178/24", "dev", "eth0")
	run(n1, "ip", "link", "set", "eth0", "up")
	run(n2, "ip", "link", "set", "eth0", "up")
	listen := func(ns *netns.NS) *net.UDPConn {
		var c *net.UDPConn
		if err := ns.Do(func() (err error) {
			c, err = net.ListenUDP("udp", &net.UDPAddr{Port: members.DefaultPort})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	conn1, conn2 := listen(n1), &killableConn{UDPConn: listen(n2)}

	var vip string
	for _, ip := range poolIPs() {
		if refOwner(ip, "node1", "node2") == "node2" {
			vip = ip
			break
		}
	}
	x := netip.MustParseAddr(vip)
	store := syncedStore(func(tx *model.Txn) {
		tx.SetNode(labNode(1, true))
		tx.SetNode(labNode(2, true))
		tx.SetService(lbSvc("web", model.TrafficPolicyCluster, vip))
	})

	a1, a2 := startAgent(t, "node1", conn1, store), startAgent(t, "node2", conn2, store)
	eventually(t, 5*time.Second, "node2 owns "+vip, func() bool { return owns(a2, x) && !owns(a1, x) })

	conn2.dead.Store(true)
	killed := time.Now()
	a2.stop()
	eventually(t, 3*time.Second, "node1 takes "+vip+" over", func() bool { return owns(a1, x) })
	took := time.Since(killed)
	t.Logf("owner killed: %s taken over after %s (members Timeout %s)", vip, took.Round(time.Millisecond), members.DefaultTimeout)
	if took > time.Second {
		t.Errorf("takeover took %s, want under 1s", took)
	}

	conn2.dead.Store(false)
	restarted := time.Now()
	a2b := startAgent(t, "node2", conn2, store)
	warmUp := 3 * members.DefaultTimeout
	for time.Since(restarted) < warmUp*3/4 {
		if !owns(a1, x) || owns(a2b, x) {
			t.Fatalf("%s after the restart, within its warm-up: node1 owns %v, node2 owns %v", time.Since(restarted), a1.ann.Owned(), a2b.ann.Owned())
		}
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, 3*time.Second, "restarted node2 owns "+vip+" again", func() bool { return owns(a2b, x) && !owns(a1, x) })
	t.Logf("restarted node2 owns %s again %s after its start (warm-up %s)", vip, time.Since(restarted).Round(time.Millisecond), warmUp)
}
