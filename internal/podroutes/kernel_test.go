package podroutes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/podroutes"
)

func ipIn(t *testing.T, ns *netns.NS, args ...string) string {
	t.Helper()
	out, err := ns.Command(append([]string{"ip"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s in %s: %v: %s", strings.Join(args, " "), ns.Name(), err, out)
	}
	return string(out)
}

// tableOf returns node's main-table gateway routes of both families as
// "DST via GW proto P", sorted.
func tableOf(t *testing.T, ns *netns.NS) []string {
	t.Helper()
	var out []string
	for _, fam := range []string{"-4", "-6"} {
		var rs []struct{ Dst, Gateway, Protocol string }
		if err := json.Unmarshal([]byte(ipIn(t, ns, "-j", fam, "route", "show", "table", "main")), &rs); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Gateway != "" {
				out = append(out, fmt.Sprintf("%s via %s proto %s", r.Dst, r.Gateway, r.Protocol))
			}
		}
	}
	slices.Sort(out)
	return out
}

func labNode(i int) *model.Node {
	return &model.Node{
		Name: fmt.Sprintf("node%d", i),
		Addresses: []model.NodeAddress{
			{Type: "InternalIP", Address: fmt.Sprintf("172.26.236.%d", 176+i)},
			{Type: "InternalIP", Address: fmt.Sprintf("fd00:26:236::%d", 176+i)},
		},
		PodCIDRs: []netip.Prefix{
			netip.MustParsePrefix(fmt.Sprintf("192.168.%d.0/24", i)),
			netip.MustParsePrefix(fmt.Sprintf("fd00:192:168:%d::/64", i)),
		},
	}
}

// lab builds three nodes on one L2 (a bridge in a fabric namespace) and a pod
// 192.168.2.5 behind node2, which forwards.
func lab(t *testing.T) (nodes []*netns.NS, pod *netns.NS) {
	fabric := netnstest.New(t, "fabric")
	ipIn(t, fabric, "link", "add", "br0", "type", "bridge")
	ipIn(t, fabric, "link", "set", "br0", "up")
	for i := 1; i <= 3; i++ {
		n := netnstest.New(t, fmt.Sprintf("node%d", i))
		port := fmt.Sprintf("vn%d", i)
		ipIn(t, fabric, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", n.Name())
		ipIn(t, fabric, "link", "set", port, "master", "br0", "up")
		ipIn(t, n, "addr", "add", fmt.Sprintf("172.26.236.%d/24", 176+i), "dev", "eth0")
		ipIn(t, n, "addr", "add", fmt.Sprintf("fd00:26:236::%d/64", 176+i), "dev", "eth0", "nodad")
		ipIn(t, n, "link", "set", "eth0", "up")
		nodes = append(nodes, n)
	}
	pod = netnstest.New(t, "pod2")
	ipIn(t, nodes[1], "link", "add", "vpod", "type", "veth", "peer", "name", "eth0", "netns", pod.Name())
	ipIn(t, nodes[1], "addr", "add", "192.168.2.1/24", "dev", "vpod")
	ipIn(t, nodes[1], "link", "set", "vpod", "up")
	if out, err := nodes[1].Command("sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		t.Fatalf("forwarding on node2: %v: %s", err, out)
	}
	ipIn(t, pod, "addr", "add", "192.168.2.5/24", "dev", "eth0")
	ipIn(t, pod, "link", "set", "eth0", "up")
	ipIn(t, pod, "route", "add", "default", "via", "192.168.2.1")
	return nodes, pod
}

// podServer listens on 192.168.2.5 in pod and answers each connection with
// the client address it saw.
func podServer(t *testing.T, pod *netns.NS) string {
	l, err := netns.Listen(pod, "tcp", "192.168.2.5:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, c.RemoteAddr().String())
			c.Close()
		}
	}()
	return l.Addr().String()
}

func waitTable(t *testing.T, ns *netns.NS, want []string) {
	t.Helper()
	var got []string
	for range 100 {
		if got = tableOf(t, ns); slices.Equal(got, want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("routes in %s:\n got %q\nwant %q", ns.Name(), got, want)
}

func TestKernelHostGW(t *testing.T) {
	nodes, pod := lab(t)
	node1 := nodes[0]
	// Somebody else's routes, and one a previous svcnet left behind.
	ipIn(t, node1, "route", "add", "10.99.0.0/24", "via", "172.26.236.1", "proto", "static")
	ipIn(t, node1, "route", "add", "192.168.4.0/24", "via", "172.26.236.1", "proto", "static")
	ipIn(t, node1, "route", "add", "192.168.9.0/24", "via", "172.26.236.179", "proto", "154")

	addr := podServer(t, pod)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := netns.Dialer(node1)
	short, scancel := context.WithTimeout(ctx, 2*time.Second)
	if c, err := dial(short, "tcp", addr); err == nil {
		c.Close()
		t.Fatal("node1 reached the pod before any pod route existed")
	}
	scancel()

	var k *podroutes.Netlink
	if err := node1.Do(func() (err error) { k, err = podroutes.NewNetlink(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	store := model.NewStore()
	node4 := &model.Node{Name: "node4", Addresses: []model.NodeAddress{{Type: "InternalIP", Address: "172.26.236.180"}},
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.4.0/24")}}
	store.Update(func(tx *model.Txn) {
		for i := 1; i <= 3; i++ {
			tx.SetNode(labNode(i))
		}
		tx.SetNode(node4)
		tx.SetSynced(true)
	})
	r, err := podroutes.New(podroutes.Config{NodeName: "node1", Kernel: k, Logger: klog.Background(), RetryBase: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, store) }()
	var stopOnce sync.Once
	stopRun := func() { stopOnce.Do(func() { stop(t, rcancel, done) }) }
	t.Cleanup(stopRun)

	foreign := []string{"10.99.0.0/24 via 172.26.236.1 proto static", "192.168.4.0/24 via 172.26.236.1 proto static"}
	all := append([]string{
		"192.168.2.0/24 via 172.26.236.178 proto 154",
		"192.168.3.0/24 via 172.26.236.179 proto 154",
		"fd00:192:168:2::/64 via fd00:26:236::178 proto 154",
		"fd00:192:168:3::/64 via fd00:26:236::179 proto 154",
	}, foreign...)
	slices.Sort(all)
	waitTable(t, node1, all)

	// Real traffic node1 -> pod on node2 through the route, without NAT.
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("node1 -> %s: %v", addr, err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	seen, err := io.ReadAll(c)
	c.Close()
	if err != nil || !strings.HasPrefix(string(seen), "172.26.236.177:") {
		t.Fatalf("pod saw client %q (%v), want 172.26.236.177:*", seen, err)
	}

	// A deleted node's routes go; the foreign ones stay.
	store.Update(func(tx *model.Txn) { tx.DeleteNode("node3") })
	want := append([]string{
		"192.168.2.0/24 via 172.26.236.178 proto 154",
		"fd00:192:168:2::/64 via fd00:26:236::178 proto 154",
	}, foreign...)
	slices.Sort(want)
	waitTable(t, node1, want)

	// Stopping leaves the routes in place (a restart adopts them).
	stopRun()
	if got := tableOf(t, node1); !slices.Equal(got, want) {
		t.Fatalf("routes after stop: %q, want %q", got, want)
	}

	// The Netlink boundary's contract against the real kernel: Add never
	// replaces another's route, Delete never removes one.
	static4 := podroutes.Route{Dst: netip.MustParsePrefix("192.168.4.0/24"), Via: netip.MustParseAddr("172.26.236.1")}
	if err := k.Add(static4); !errors.Is(err, podroutes.ErrExists) {
		t.Errorf("Add over a static route: %v, want ErrExists", err)
	}
	if err := k.Delete(static4); err != nil {
		t.Errorf("Delete of a static route: %v, want nil (not ours: untouched)", err)
	}
	if got := tableOf(t, node1); !slices.Equal(got, want) {
		t.Fatalf("routes after Add/Delete on a foreign route: %q, want %q", got, want)
	}

	// Cleanup removes exactly ours.
	n, err := podroutes.Cleanup(ctx, k)
	if err != nil || n != 2 {
		t.Fatalf("Cleanup = %d, %v; want 2", n, err)
	}
	if got := tableOf(t, node1); !slices.Equal(got, foreign) {
		t.Fatalf("routes after Cleanup: %q, want %q", got, foreign)
	}
	short, scancel = context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	if c, err := dial(short, "tcp", addr); err == nil {
		c.Close()
		t.Fatal("node1 still reaches the pod after Cleanup")
	}
}

// stop cancels a Run and waits (bounded) for it to return nil.
func stop(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Run did not stop")
	}
}
