package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns"
)

var (
	cip       = netip.MustParseAddr("10.96.0.20")
	cipUDP    = netip.MustParseAddr("10.96.0.10")
	cip6      = netip.MustParseAddr("fd00:96::20")
	extIP     = netip.MustParseAddr("203.0.113.10")
	lbIP      = netip.MustParseAddr("198.51.100.80")
	lbRangeIP = netip.MustParseAddr("198.51.100.81")
)

// TestKernelClusterIP: TCP and UDP through a ClusterIP from outside, from
// a pod and from the node itself reach both endpoints (round robin); the
// endpoint sees the node, not the client.
func TestKernelClusterIP(t *testing.T) {
	n := newKernelNode(t)
	a, b := n.addPod("pod-a", true), n.addPod("pod-b", true)
	client := n.addPod("client-pod", false)
	plane := n.plane(Config{})
	n.sync(plane, table(kernelNodeConfig,
		svc("web", "http", model.ProtocolTCP, cip.String(), 80, a.ep(true), b.ep(false)),
		svc("dns", "dns", model.ProtocolUDP, cipUDP.String(), 53, a.ep(true), b.ep(false))))
	for _, from := range []struct {
		name string
		ns   *netns.NS
	}{{"outside", n.client}, {"a pod", client.ns}, {"the node", n.node}} {
		if got := pods(t, from.ns, ap(cip, 80), 4); got["pod-a"] != 2 || got["pod-b"] != 2 {
			t.Errorf("TCP from %s: %v, want 2 each (round robin)", from.name, got)
		}
		seen := map[string]bool{}
		for range 4 {
			name, err := askUDP(from.ns, ap(cipUDP, 53), "hostname")
			if err != nil {
				t.Fatalf("UDP from %s: %v", from.name, err)
			}
			seen[name] = true
		}
		if len(seen) == 0 {
			t.Errorf("UDP from %s: no answer", from.name)
		}
	}
	// The client's address is lost: the endpoint sees the node's.
	got, err := ask(n.client, netip.Addr{}, ap(cip, 80), "clientip")
	if err != nil {
		t.Fatal(err)
	}
	if seen, err := netip.ParseAddrPort(got); err != nil || seen.Addr() != bridgeIP4 {
		t.Errorf("the endpoint saw %q, want the node's address %s", got, bridgeIP4)
	}
}

// TestKernelExternal: NodePort on the node's address, an externalIP and an
// LB IP (UDP and TCP) from outside and from the node; an LB IP with
// loadBalancerSourceRanges answers a client inside them only.
func TestKernelExternal(t *testing.T) {
	n := newKernelNode(t)
	a := n.addPod("pod-a", true)
	plane := n.plane(Config{})
	n.sync(plane, table(kernelNodeConfig,
		withLB(withExternalIP(withNodePort(svc("web", "http", model.ProtocolTCP, cip.String(), 80, a.ep(true)), 30080, kernelNodeConfig), extIP.String()), lbIP.String()),
		withExternalIP(svc("dns", "dns", model.ProtocolUDP, cipUDP.String(), 53, a.ep(true)), extIP.String()),
		withLB(svc("fw", "", model.ProtocolTCP, "10.96.0.21", 80, a.ep(true)), lbRangeIP.String(), "172.26.236.10/32")))
	for _, c := range []struct {
		name string
		ns   *netns.NS
		to   netip.AddrPort
	}{
		{"NodePort from outside", n.client, ap(nodeIP4, 30080)},
		{"NodePort from the node", n.node, ap(nodeIP4, 30080)},
		{"externalIP from outside", n.client, ap(extIP, 80)},
		{"externalIP from the node", n.node, ap(extIP, 80)},
		{"LB IP from outside", n.client, ap(lbIP, 80)},
		{"LB IP from the node", n.node, ap(lbIP, 80)},
		{"LB IP from inside its source ranges", n.client, ap(lbRangeIP, 80)},
	} {
		if got, err := ask(c.ns, netip.Addr{}, c.to, "hostname"); err != nil || got != "pod-a" {
			t.Errorf("%s (%s): %q, %v", c.name, c.to, got, err)
		}
	}
	if got, err := ask(n.client, clientIP4, ap(lbRangeIP, 80), "hostname"); err != nil || got != "pod-a" {
		t.Errorf("LB IP from %s, inside its source ranges: %q, %v", clientIP4, got, err)
	}
	// NodePorts are never served on loopback (CVE-2020-8558), as in the
	// nftables plane: nothing listens there.
	if got, err := ask(n.node, netip.Addr{}, ap(netip.MustParseAddr("127.0.0.1"), 30080), "hostname"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("NodePort on 127.0.0.1: %q, %v; want refused", got, err)
	}
	if got, err := askUDP(n.client, ap(extIP, 53), "hostname"); err != nil || got != "pod-a" {
		t.Errorf("UDP externalIP: %q, %v", got, err)
	}
	if got, err := ask(n.client, otherClientIP4, ap(lbRangeIP, 80), "hostname"); err == nil {
		t.Errorf("LB IP from outside its source ranges answered %q", got)
	}
	if got, err := ask(n.client, otherClientIP4, ap(lbIP, 80), "hostname"); err != nil || got != "pod-a" {
		t.Errorf("LB IP without source ranges from %s: %q, %v", otherClientIP4, got, err)
	}
}

// TestKernelLocalPolicies: externalTrafficPolicy Local sends external
// traffic from outside to local endpoints only (and pod traffic to every
// endpoint); internalTrafficPolicy Local sends ClusterIP traffic to local
// endpoints only.
func TestKernelLocalPolicies(t *testing.T) {
	n := newKernelNode(t)
	a, b := n.addPod("pod-a", true), n.addPod("pod-b", true)
	client := n.addPod("client-pod", false)
	plane := n.plane(Config{})
	n.sync(plane, table(kernelNodeConfig,
		etpLocal(withNodePort(svc("etp", "", model.ProtocolTCP, cip.String(), 80, a.ep(true), b.ep(false)), 30080, kernelNodeConfig)),
		itpLocal(svc("itp", "", model.ProtocolTCP, "10.96.0.21", 80, a.ep(true), b.ep(false)))))
	if got := pods(t, n.client, ap(nodeIP4, 30080), 4); got["pod-a"] != 4 {
		t.Errorf("ETP Local NodePort from outside: %v, want the local pod only", got)
	}
	if got := pods(t, client.ns, ap(nodeIP4, 30080), 4); got["pod-a"] != 2 || got["pod-b"] != 2 {
		t.Errorf("ETP Local NodePort from a pod: %v, want both (short-circuit)", got)
	}
	if got := pods(t, n.client, ap(netip.MustParseAddr("10.96.0.21"), 80), 4); got["pod-a"] != 4 {
		t.Errorf("ITP Local from outside: %v, want the local pod only", got)
	}
	if got := pods(t, n.node, ap(netip.MustParseAddr("10.96.0.21"), 80), 4); got["pod-a"] != 4 {
		t.Errorf("ITP Local from the node: %v, want the local pod only", got)
	}
}

// TestKernelNoEndpoints: a Service port without endpoints refuses at once,
// TCP (a reset to the SYN) and UDP (ICMP port unreachable), on the
// ClusterIP and the NodePort, from outside, from the node and from a pod
// on the bridge (with br_netfilter's hooks on the bridge, as on a host that
// loaded it, where a reset to a redirected SYN would leave with the proxy
// port's address), and so does a port the ClusterIP does not have; under
// externalTrafficPolicy Local without a local endpoint, traffic from
// outside is dropped and a pod's is short-circuited to the cluster set.
func TestKernelNoEndpoints(t *testing.T) {
	n := newKernelNode(t)
	b := n.addPod("pod-b", true)
	client := n.addPod("client-pod", false)
	if !n.bridgeNetfilter() {
		t.Log("br_netfilter is not loaded: the pod's traffic reaches IP without the bridge's netfilter hooks")
	}
	plane := n.plane(Config{})
	n.sync(plane, table(kernelNodeConfig,
		withNodePort(svc("none", "", model.ProtocolTCP, cip.String(), 80), 30080, kernelNodeConfig),
		svc("noneudp", "", model.ProtocolUDP, cipUDP.String(), 53),
		etpLocal(withNodePort(svc("etp", "", model.ProtocolTCP, "10.96.0.21", 80, b.ep(false)), 30081, kernelNodeConfig))))
	refused := func(what string, err error, start time.Time) {
		t.Helper()
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: %v, want refused", what, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: refused after %s, want at once", what, d)
		}
	}
	for _, from := range []struct {
		name string
		ns   *netns.NS
	}{{"outside", n.client}, {"the node", n.node}, {"a pod", client.ns}} {
		for _, to := range []netip.AddrPort{ap(cip, 80), ap(nodeIP4, 30080)} {
			start := time.Now()
			_, err := ask(from.ns, netip.Addr{}, to, "hostname")
			refused("TCP from "+from.name+" to "+to.String(), err, start)
		}
		start := time.Now()
		_, err := askUDP(from.ns, ap(cipUDP, 53), "hostname")
		refused("UDP from "+from.name, err, start)
		// A port the Service does not have is refused too.
		start = time.Now()
		_, err = ask(from.ns, netip.Addr{}, ap(cip, 81), "hostname")
		refused("TCP from "+from.name+" to a port the ClusterIP lacks", err, start)
	}
	if _, err := ask(n.client, netip.Addr{}, ap(nodeIP4, 30081), "hostname"); !isTimeout(err) {
		t.Errorf("ETP Local without a local endpoint, from outside: %v, want dropped (a timeout)", err)
	}
	if got, err := ask(client.ns, netip.Addr{}, ap(nodeIP4, 30081), "hostname"); err != nil || got != "pod-b" {
		t.Errorf("ETP Local without a local endpoint, from a pod: %q, %v; want the short-circuit to pod-b", got, err)
	}
}

// isTimeout reports whether err is a timeout: what a dropped connection
// attempt gives.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestKernelAffinity: with ClientIP affinity every connection of a client
// goes to the same endpoint.
func TestKernelAffinity(t *testing.T) {
	n := newKernelNode(t)
	a, b := n.addPod("pod-a", true), n.addPod("pod-b", true)
	plane := n.plane(Config{})
	sp := svc("aff", "", model.ProtocolTCP, cip.String(), 80, a.ep(true), b.ep(false))
	sp.AffinityTimeout = time.Hour
	n.sync(plane, table(kernelNodeConfig, sp))
	if got := pods(t, n.client, ap(cip, 80), 6); len(got) != 1 {
		t.Errorf("with affinity: %v, want one pod", got)
	}
}

// TestKernelIPv6: ClusterIP and NodePort over IPv6 from outside and from
// the node.
func TestKernelIPv6(t *testing.T) {
	n := newKernelNode(t)
	a, b := n.addPod("pod-a", true), n.addPod("pod-b", true)
	plane := n.plane(Config{})
	n.sync(plane, table(kernelNodeConfig,
		withNodePort(svc("web6", "", model.ProtocolTCP, cip6.String(), 80, a.ep6(true), b.ep6(false)), 30080, kernelNodeConfig),
		svc("dns6", "", model.ProtocolUDP, "fd00:96::a", 53, a.ep6(true))))
	for _, c := range []struct {
		name string
		ns   *netns.NS
		to   netip.AddrPort
	}{
		{"ClusterIP from outside", n.client, ap(cip6, 80)},
		{"ClusterIP from the node", n.node, ap(cip6, 80)},
		{"NodePort from outside", n.client, ap(nodeIP6, 30080)},
	} {
		if got := pods(t, c.ns, c.to, 2); got["pod-a"] != 1 || got["pod-b"] != 1 {
			t.Errorf("%s: %v, want one each", c.name, got)
		}
	}
	if got, err := askUDP(n.client, ap(netip.MustParseAddr("fd00:96::a"), 53), "hostname"); err != nil || got != "pod-a" {
		t.Errorf("UDP over IPv6: %q, %v", got, err)
	}
	got, err := ask(n.client, netip.Addr{}, ap(cip6, 80), "clientip")
	if seen, perr := netip.ParseAddrPort(got); err != nil || perr != nil || seen.Addr() != bridgeIP6 {
		t.Errorf("the endpoint saw %q (%v), want the node's address %s", got, err, bridgeIP6)
	}
}

// TestKernelRetry is the proxy's reason to be: endpoints whose pods are
// gone (the namespace deleted: connects time out; alive with nothing
// listening: refused) are still in the endpoint set, and a bounded loop of
// connections through the ClusterIP gives no failed request with the retry,
// and failures with Attempts 1.
func TestKernelRetry(t *testing.T) {
	const requests = 24
	n := newKernelNode(t)
	a, b := n.addPod("pod-a", true), n.addPod("pod-b", true)
	gone := n.addPod("pod-gone", true)
	silent := n.addPod("pod-silent", false)
	tbl := table(kernelNodeConfig, svc("web", "", model.ProtocolTCP, cip.String(), 80, a.ep(true), b.ep(false), gone.ep(false), silent.ep(false)))
	// The pod dies: its process ends (no socket holds the namespace) and
	// the namespace goes, with its veth.
	gone.stop()
	if err := gone.ns.Delete(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the gone pod's veth to disappear", func() bool {
		out, err := n.node.Command("ip", "-br", "link", "show", "master", "cbr0").CombinedOutput()
		return err == nil && strings.Count(strings.TrimSpace(string(out)), "\n") == 2
	})
	for _, c := range []struct {
		name     string
		attempts int
		wantFail bool
	}{{"retry", 0, false}, {"no retry", 1, true}} {
		t.Run(c.name, func(t *testing.T) {
			plane := n.plane(Config{Attempts: c.attempts, DialTimeout: 300 * time.Millisecond})
			n.sync(plane, tbl)
			failed := 0
			for range requests {
				if _, err := ask(n.client, netip.Addr{}, ap(cip, 80), "hostname"); err != nil {
					failed++
				}
			}
			st := plane.Proxy().Stats()
			t.Logf("%d requests, %d failed; proxy: %+v", requests, failed, st)
			if c.wantFail && failed == 0 {
				t.Errorf("no failed request without the retry: the test cannot tell the retry's effect")
			}
			if !c.wantFail && failed != 0 {
				t.Errorf("%d of %d requests failed with the retry", failed, requests)
			}
			if st.FailedConnects == 0 {
				t.Errorf("no failed connect: the dead endpoints were never chosen")
			}
			n.cleanup(plane)
		})
	}
}

// cleanup removes the plane's table and ports; nothing of it is left.
func (n *kernelNode) cleanup(b *Backend) {
	t := n.t
	t.Helper()
	if err := b.Cleanup(context.Background()); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	out, err := n.node.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("after Cleanup, nft list ruleset: %v\n%s", err, out)
	}
	if got := listening(t, n.node); got != "" {
		t.Errorf("after Cleanup, sockets in the node:\n%s", got)
	}
}

// TestKernelRestartAndCleanup: a restarted plane (new proxy ports) replaces
// the table in one transaction and serves; Cleanup leaves nothing.
func TestKernelRestartAndCleanup(t *testing.T) {
	n := newKernelNode(t)
	a := n.addPod("pod-a", true)
	tbl := table(kernelNodeConfig,
		withNodePort(svc("web", "", model.ProtocolTCP, cip.String(), 80, a.ep(true)), 30080, kernelNodeConfig),
		svc("dns", "", model.ProtocolUDP, cipUDP.String(), 53, a.ep(true)))
	first := n.plane(Config{})
	n.sync(first, tbl)
	if got := pods(t, n.client, ap(cip, 80), 1); got["pod-a"] != 1 {
		t.Fatalf("first run: %v", got)
	}
	before, _ := first.Proxy().Addr(Key{ID: tbl.Ports[0].ID, Family: v4})
	first.Close() // the process ends: its sockets close, the table stays
	second := n.plane(Config{})
	var st struct {
		full bool
		ops  int
	}
	if err := n.node.Do(func() error {
		s, err := second.Sync(context.Background(), tbl, false)
		st.full, st.ops = s.Full, s.TotalOps()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	after, _ := second.Proxy().Addr(Key{ID: tbl.Ports[0].ID, Family: v4})
	if !st.full || st.ops == 0 || after == before {
		t.Errorf("restart: full %v, %d ops, proxy port %s then %s", st.full, st.ops, before, after)
	}
	for _, to := range []netip.AddrPort{ap(cip, 80), ap(nodeIP4, 30080)} {
		if got := pods(t, n.client, to, 1); got["pod-a"] != 1 {
			t.Errorf("after restart, %s: %v", to, got)
		}
	}
	if got, err := askUDP(n.client, ap(cipUDP, 53), "hostname"); err != nil || got != "pod-a" {
		t.Errorf("after restart, UDP: %q, %v", got, err)
	}
	n.cleanup(second)
}
