package userspace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/echo"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// The kernel tier's node: node1 of the lab's IP plan with a client on its
// node network and pods behind its bridge.
var (
	nodeIP4, nodeIP6 = netip.MustParseAddr("172.26.236.177"), netip.MustParseAddr("fd00:26:236::177")
	clientIP4        = netip.MustParseAddr("172.26.236.10")
	// otherClientIP4 is a second address of the client, outside the
	// source ranges the tests allow.
	otherClientIP4   = netip.MustParseAddr("172.26.236.20")
	bridgeIP4        = netip.MustParseAddr("192.168.1.1")
	bridgeIP6        = netip.MustParseAddr("fd00:192:168:1::1")
	echoPort         = 8080
	kernelNodeConfig = servicetable.NodeConfig{
		NodeName:          "node1",
		NodePortAddresses: []netip.Addr{nodeIP4, nodeIP6},
		ClusterCIDRs:      []netip.Prefix{cidr("192.168.0.0/16"), cidr("fd00:192:168::/56")},
	}
)

// testNode is a node namespace with the redirect table's plane in it, a
// client namespace on its node network (routes to the Service, external
// and LB ranges through the node) and pod namespaces on its bridge.
type kernelNode struct {
	t      *testing.T
	node   *netns.NS
	client *netns.NS
	pods   int
}

// kpod is a pod: its namespace and addresses.
type kpod struct {
	name     string
	ns       *netns.NS
	ip4, ip6 netip.Addr
	// stop stops the echo server (nil without one); idempotent.
	stop func()
}

func (p *kpod) ep(local bool) servicetable.Endpoint {
	return tep(p.ip4.String(), uint16(echoPort), local)
}

func (p *kpod) ep6(local bool) servicetable.Endpoint {
	return tep(p.ip6.String(), uint16(echoPort), local)
}

// sh runs ip commands (one per line) in ns.
func sh(t *testing.T, ns *netns.NS, lines ...string) {
	t.Helper()
	for _, l := range lines {
		out, err := ns.Command(strings.Fields(l)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", l, err, out)
		}
	}
}

func newKernelNode(t *testing.T) *kernelNode {
	t.Helper()
	netnstest.RequireRoot(t)
	n := &kernelNode{t: t, node: netnstest.New(t, "usnode"), client: netnstest.New(t, "usclient")}
	sh(t, n.node,
		"sysctl -qw net.ipv4.ip_forward=1",
		"sysctl -qw net.ipv6.conf.all.forwarding=1",
		"ip link set lo up",
		"ip link add eth0 type veth peer name eth0 netns "+n.client.Name(),
		"ip addr add 172.26.236.177/24 dev eth0",
		"ip addr add fd00:26:236::177/64 dev eth0 nodad",
		"ip link set eth0 up",
		"ip link add cbr0 type bridge",
		"ip addr add 192.168.1.1/24 dev cbr0",
		"ip addr add fd00:192:168:1::1/64 dev cbr0 nodad",
		"ip link set cbr0 up",
		"ip route add default via 172.26.236.10",
		"ip -6 route add default via fd00:26:236::10")
	sh(t, n.client,
		"ip link set lo up",
		"ip addr add 172.26.236.10/24 dev eth0",
		"ip addr add 172.26.236.20/24 dev eth0",
		"ip addr add fd00:26:236::10/64 dev eth0 nodad",
		"ip link set eth0 up",
		"ip route add 10.96.0.0/12 via 172.26.236.177",
		"ip route add 198.51.100.0/24 via 172.26.236.177",
		"ip route add 203.0.113.0/24 via 172.26.236.177",
		"ip -6 route add fd00:96::/108 via fd00:26:236::177")
	return n
}

// bridgeNetfilter turns on br_netfilter's IPv4 and IPv6 hooks on the node's
// bridge (a namespace's own setting, on by default when the module is
// loaded): what a lab node on such a host has. False when the module is not
// loaded (the host's choice: loading it would turn the hooks on in every
// namespace); the node's bridge then has none.
func (n *kernelNode) bridgeNetfilter() bool {
	n.t.Helper()
	if err := n.node.Command("sysctl", "-n", "net.bridge.bridge-nf-call-iptables").Run(); err != nil {
		return false
	}
	sh(n.t, n.node, "sysctl -qw net.bridge.bridge-nf-call-iptables=1", "sysctl -qw net.bridge.bridge-nf-call-ip6tables=1")
	return true
}

// addPod adds a pod on the bridge; serve starts its echo server (TCP and
// UDP echoPort, both families), stopped when the test ends.
func (n *kernelNode) addPod(name string, serve bool) *kpod {
	t := n.t
	t.Helper()
	n.pods++
	i := n.pods
	p := &kpod{name: name, ns: netnstest.New(t, "uspod"),
		ip4: netip.MustParseAddr(fmt.Sprintf("192.168.1.%d", 9+i)), ip6: netip.MustParseAddr(fmt.Sprintf("fd00:192:168:1::%x", 9+i))}
	veth := fmt.Sprintf("vp%d", i)
	sh(t, n.node,
		"ip link add "+veth+" type veth peer name eth0 netns "+p.ns.Name(),
		"ip link set "+veth+" master cbr0",
		"ip link set "+veth+" up")
	sh(t, p.ns,
		"ip link set lo up",
		"ip addr add "+p.ip4.String()+"/24 dev eth0",
		"ip addr add "+p.ip6.String()+"/64 dev eth0 nodad",
		"ip link set eth0 up",
		"ip route add default via 192.168.1.1",
		"ip -6 route add default via fd00:192:168:1::1")
	if serve {
		p.stop = startPodEcho(t, p)
	}
	return p
}

// startPodEcho runs the echo server in p's namespace until the test ends
// or stop.
func startPodEcho(t *testing.T, p *kpod) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	cfg := echo.Config{Name: p.name, PodIP: p.ip4, TCP: []int{echoPort}, UDP: []int{echoPort}, Ready: func(_, _ []net.Addr) { close(ready) }}
	go func() { done <- p.ns.Do(func() error { return echo.Serve(ctx, cfg, klog.Background().V(9)) }) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("echo server %s: %v", p.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("echo server %s did not stop", p.name)
		}
	}
	t.Cleanup(stop)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("echo server %s: %v", p.name, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("echo server %s not ready", p.name)
	}
	return stop
}

// plane opens the userspace plane in the node namespace: its netlink
// handle and sockets live there, and its dials are made from there.
func (n *kernelNode) plane(cfg Config) *Backend {
	t := n.t
	t.Helper()
	var b *Backend
	err := n.node.Do(func() error {
		c, err := netlink.New()
		if err != nil {
			return err
		}
		t.Cleanup(func() { c.Close() })
		if cfg.Dial == nil {
			cfg.Dial = netns.Dialer(n.node)
		}
		b = NewBackend(c, cfg)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Probe(context.Background()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	return b
}

// sync runs b.Sync in the node namespace, where its sockets must open.
func (n *kernelNode) sync(b *Backend, tbl *servicetable.Table) {
	n.t.Helper()
	if err := n.node.Do(func() error {
		_, err := b.Sync(context.Background(), tbl, false)
		return err
	}); err != nil {
		n.t.Fatalf("Sync: %v", err)
	}
}

// ask sends a line-protocol command through a new TCP connection from ns
// (from src, when valid) to addr and returns the answer.
func ask(ns *netns.NS, src netip.Addr, addr netip.AddrPort, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return echo.TCPLine(ctx, dialFrom(ns, src), addr.String(), cmd)
}

// askUDP sends a command in one datagram from ns to addr.
func askUDP(ns *netns.NS, addr netip.AddrPort, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return echo.UDP(ctx, netns.Dialer(ns), addr.String(), cmd)
}

// dialFrom returns a dialer whose sockets live in ns and, when src is
// valid, are bound to src.
func dialFrom(ns *netns.NS, src netip.Addr) echo.DialFunc {
	if !src.IsValid() {
		return netns.Dialer(ns)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// pods asks addr for the pod's name n times from ns and returns the
// answers counted; a failed request fails the test.
func pods(t *testing.T, ns *netns.NS, addr netip.AddrPort, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		name, err := ask(ns, netip.Addr{}, addr, "hostname")
		if err != nil {
			t.Fatalf("hostname through %s: %v", addr, err)
		}
		got[name]++
	}
	return got
}

// listening returns the node's listening TCP and bound UDP sockets (ss).
func listening(t *testing.T, ns *netns.NS) string {
	t.Helper()
	out, err := ns.Command("ss", "-Hltun").CombinedOutput()
	if err != nil {
		if _, lerr := exec.LookPath("ss"); lerr != nil {
			t.Fatalf("ss: %v", lerr)
		}
		t.Fatalf("ss: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func ap(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

var v4 = ipfamily.IPv4
