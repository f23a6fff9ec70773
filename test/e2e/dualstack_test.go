package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/dns/resolv"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/labtest"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/testbin"
	"github.com/svcnet/svcnet/internal/trace"
)

// The dual-stack and IPv6 cases of Kubernetes' Service e2e tests
// (test/e2e/network/dual_stack.go, in intent), on labs built with `lab up
// --ip-family dual` and `--ip-family ipv6`: per family, a pod reaches a
// Service's ClusterIP of that family (TCP and UDP), the external client
// reaches its LoadBalancer IP of that family (answered by one node, by ARP
// or NDP) and a NodePort on a node's address of that family, the cluster
// DNS answers A and AAAA with the ClusterIPs, externalTrafficPolicy Local
// keeps the client's address of that family, and the tracer's kernel
// verification agrees.

func TestDualStackFileControlPlane(t *testing.T) {
	dualStackSuite(t, cluster.ControlPlaneFile, topology.StackDual)
}

func TestDualStackKubeControlPlane(t *testing.T) {
	requireKubeTier(t)
	dualStackSuite(t, cluster.ControlPlaneKube, topology.StackDual)
}

func TestIPv6OnlyFileControlPlane(t *testing.T) {
	dualStackSuite(t, cluster.ControlPlaneFile, topology.StackIPv6)
}

// dualStackSuite brings up a 3-node lab of the IP families family on the
// control plane, applies dualstack.yaml and runs every case for each of
// the lab's families.
func dualStackSuite(t *testing.T, controlPlane, family string) {
	netnstest.RequireRoot(t)
	stack, err := topology.ParseStack(family)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	l := labtest.Up(t, ctx, lab.Options{Name: labtest.Name(family) + "-" + controlPlane, Nodes: 3, ControlPlane: controlPlane,
		IPFamily: family, Binary: svcnetBin, Progress: testWriter{t}}, "dualstack.yaml")
	e := &env{t: t, ctx: ctx, l: l}

	t.Run("Nodes", func(t *testing.T) { nodeFamilies(t, e, stack) })
	t.Run("ServiceFamilies", func(t *testing.T) { serviceFamilies(t, e, stack) })
	for _, f := range stack {
		t.Run(f.String(), func(t *testing.T) {
			t.Run("PodToClusterIP", func(t *testing.T) { podToClusterIP(t, e, f) })
			t.Run("UDPClusterIP", func(t *testing.T) { udpClusterIP(t, e, f) })
			t.Run("ClientToLoadBalancerIP", func(t *testing.T) { clientToLBIP(t, e, f) })
			t.Run("ClientToNodePort", func(t *testing.T) { clientToNodePort(t, e, stack, f) })
			t.Run("LocalKeepsClient", func(t *testing.T) { localKeepsClient(t, e, stack, f) })
			t.Run("DNS", func(t *testing.T) { dnsOfFamily(t, e, f) })
			t.Run("TraceVerified", func(t *testing.T) { traceFamily(t, e, f) })
		})
	}
	if len(stack) == 1 {
		t.Run("NoOtherFamily", func(t *testing.T) { noOtherFamily(t, e, stack) })
	}
}

// nodeFamilies: every Node has an InternalIP and a pod CIDR of each family,
// the primary's first, and its kernel holds them.
func nodeFamilies(t *testing.T, e *env, stack topology.Stack) {
	r, err := e.l.Get(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Nodes) != 3 {
		t.Fatalf("%d Nodes, want 3", len(r.Nodes))
	}
	for _, n := range r.Nodes {
		i := topology.NodeIndex(n.Name)
		var ips []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		if want := texts(stack.NodeAddrs(i)); !slices.Equal(ips, want) {
			t.Errorf("Node %s InternalIPs %v, want %v", n.Name, ips, want)
		}
		if want := texts(stack.PodCIDRs(i)); !slices.Equal(n.Spec.PodCIDRs, want) {
			t.Errorf("Node %s podCIDRs %v, want %v", n.Name, n.Spec.PodCIDRs, want)
		}
	}
	p := e.pod("client-1")
	if len(p.Status.PodIPs) != len(stack) {
		t.Fatalf("client-1 podIPs %v, want one per family of %v", p.Status.PodIPs, stack)
	}
	for k, f := range stack {
		a := netip.MustParseAddr(p.Status.PodIPs[k].IP)
		if ipfamily.Of(a) != f || !stack.PodCIDRs(1)[k].Contains(a) {
			t.Errorf("client-1 podIPs[%d] %s: want an %s address of node1's %s", k, a, f, stack.PodCIDRs(1)[k])
		}
	}
}

// serviceFamilies: PreferDualStack gets a ClusterIP and a LoadBalancer IP
// of each of the lab's families, the primary first; a Service that says
// nothing gets the primary family only, as the first
// --service-cluster-ip-range makes it.
func serviceFamilies(t *testing.T, e *env, stack topology.Stack) {
	web := e.service("web")
	if got := serviceFamilyList(web); !slices.Equal(got, []ipfamily.Family(stack)) {
		t.Errorf("web: clusterIPs %v (families %v), want one of each of %v in that order", web.Spec.ClusterIPs, got, stack)
	}
	if web.Spec.ClusterIP != web.Spec.ClusterIPs[0] {
		t.Errorf("web: clusterIP %s is not clusterIPs[0] %s", web.Spec.ClusterIP, web.Spec.ClusterIPs[0])
	}
	for _, f := range stack {
		ip := lbIPOf(t, e, "web", f)
		if !lab.InPool(ip) {
			t.Errorf("web: LoadBalancer IP %s is not in the lab's pool", ip)
		}
	}
	single := e.service("web-single")
	if got := serviceFamilyList(single); !slices.Equal(got, []ipfamily.Family{stack.Primary()}) {
		t.Errorf("web-single: clusterIPs %v, want one of the primary family %s", single.Spec.ClusterIPs, stack.Primary())
	}
}

func serviceFamilyList(s *corev1.Service) []ipfamily.Family {
	var out []ipfamily.Family
	for _, ip := range s.Spec.ClusterIPs {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return nil
		}
		out = append(out, ipfamily.Of(a))
	}
	return out
}

// clusterIPOf returns the Service's ClusterIP of family f.
func clusterIPOf(t *testing.T, s *corev1.Service, f ipfamily.Family) netip.Addr {
	t.Helper()
	for _, ip := range s.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil && ipfamily.Of(a) == f {
			return a
		}
	}
	t.Fatalf("Service %s: no %s ClusterIP in %v", s.Name, f, s.Spec.ClusterIPs)
	return netip.Addr{}
}

// lbIPOf waits (bounded) for the Service's LoadBalancer IP of family f.
func lbIPOf(t *testing.T, e *env, name string, f ipfamily.Family) netip.Addr {
	t.Helper()
	var ip netip.Addr
	e.eventually(name+" gets an "+f.String()+" LoadBalancer IP", func() error {
		for _, in := range e.service(name).Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil && ipfamily.Of(a) == f {
				ip = a
				return nil
			}
		}
		return fmt.Errorf("no %s address in status.loadBalancer.ingress", f)
	})
	return ip
}

func httpURL(ip netip.Addr, port int) string {
	return fmt.Sprintf("http://%s/", net.JoinHostPort(ip.String(), fmt.Sprint(port)))
}

// familyOf fails t unless every client address the pods saw is of family f.
func familyOf(t *testing.T, clients map[string]int, f ipfamily.Family) {
	t.Helper()
	for c := range clients {
		a, err := netip.ParseAddr(c)
		if err != nil || ipfamily.Of(a) != f {
			t.Errorf("a pod saw the client as %q: want an %s address", c, f)
		}
	}
}

// podToClusterIP: from a pod, the ClusterIP of family f reaches both pods,
// which see the pod's address of that family.
func podToClusterIP(t *testing.T, e *env, f ipfamily.Family) {
	u := httpURL(clusterIPOf(t, e.service("web"), f), 80)
	e.eventually("web answers client-1 from both pods over "+f.String(), func() error {
		pods := map[string]int{}
		for _, h := range e.curl("client-1", u, 12, 2*time.Second) {
			if h.Err != nil {
				return h.Err
			}
			pods[h.Reply.Pod]++
		}
		if len(pods) != 2 {
			return fmt.Errorf("answered by %v, want web-1 and web-2", pods)
		}
		return onlyKeys(pods, "web-1", "web-2")
	})
	_, clients := answered(t, "client-1", e.curl("client-1", u, 4, 2*time.Second))
	familyOf(t, clients, f)
}

// udpClusterIP: a datagram to the ClusterIP of family f is answered.
func udpClusterIP(t *testing.T, e *env, f ipfamily.Family) {
	ip := clusterIPOf(t, e.service("web"), f)
	u := "udp://" + net.JoinHostPort(ip.String(), "81")
	e.eventually("UDP "+u, func() error { return e.curl("client-1", u, 1, time.Second)[0].Err })
	pods, clients := answered(t, "client-1", e.curl("client-1", u, 6, 2*time.Second))
	if err := onlyKeys(pods, "web-1", "web-2"); err != nil {
		t.Fatal(err)
	}
	familyOf(t, clients, f)
}

// clientToLBIP: the external client reaches the LoadBalancer IP of family
// f, and its neighbour table names the node that answered ARP (IPv4) or
// NDP (IPv6) for it.
func clientToLBIP(t *testing.T, e *env, f ipfamily.Family) {
	ip := lbIPOf(t, e, "web", f)
	u := httpURL(ip, 80)
	e.eventually("LoadBalancer IP "+ip.String()+" answers", func() error { return e.curl("client", u, 1, time.Second)[0].Err })
	pods, clients := answered(t, "client", e.curl("client", u, 10, 2*time.Second))
	if err := onlyKeys(pods, "web-1", "web-2"); err != nil {
		t.Fatal(err)
	}
	familyOf(t, clients, f)
	owner, err := e.l.Announcer(ip)
	if err != nil {
		t.Fatalf("%s: no node's MAC in the client's neighbour table: %v", ip, err)
	}
	t.Logf("%s is answered for by node%d", ip, owner)
}

// clientToNodePort: the NodePort on node1's address of family f (node1 has
// no pod of web) reaches the pods on the other nodes.
func clientToNodePort(t *testing.T, e *env, stack topology.Stack, f ipfamily.Family) {
	node1 := stack.NodeAddrs(1)[slices.Index(stack, f)]
	u := httpURL(node1, int(e.service("web").Spec.Ports[0].NodePort))
	e.eventually("NodePort "+u, func() error { return e.curl("client", u, 1, time.Second)[0].Err })
	pods, clients := answered(t, "client", e.curl("client", u, 10, 2*time.Second))
	if err := onlyKeys(pods, "web-1", "web-2"); err != nil {
		t.Fatal(err)
	}
	familyOf(t, clients, f)
}

// localKeepsClient: through web-local's LoadBalancer IP of family f
// (externalTrafficPolicy Local), the pod sees the client's own address of
// that family; on the userspace plane, whose proxy connects to the pod
// itself, it sees its node's bridge address of that family.
func localKeepsClient(t *testing.T, e *env, stack topology.Stack, f ipfamily.Family) {
	k := slices.Index(stack, f)
	ip := lbIPOf(t, e, "web-local", f)
	u := httpURL(ip, 80)
	e.eventually("LoadBalancer IP "+ip.String()+" (Local) answers", func() error { return e.curl("client", u, 1, time.Second)[0].Err })
	hits := e.curl("client", u, 6, 2*time.Second)
	_, clients := answered(t, "client", hits)
	want := []string{stack.ClientAddrs()[k].String()}
	if testbin.DataPlane() == "userspace" {
		want = nil
		for _, i := range []int{2, 3} {
			want = append(want, stack.PodCIDRs(i)[k].Addr().Next().String())
		}
	}
	if err := onlyKeys(clients, want...); err != nil {
		t.Error(err)
	}
}

// dnsOfFamily: from a pod, the cluster DNS answers web's record of family f
// (A or AAAA) with web's ClusterIP of that family.
func dnsOfFamily(t *testing.T, e *env, f ipfamily.Family) {
	qtype := "A"
	if f == ipfamily.IPv6 {
		qtype = "AAAA"
	}
	want := clusterIPOf(t, e.service("web"), f).String()
	r := e.resolve(t, "client-1", "-t", qtype, "web")
	if r.code != 0 || !slices.Equal(r.lines, []string{want}) {
		t.Errorf("client-1: resolve -t %s web: %q (exit %d, %s), want [%s]", qtype, r.lines, r.code, r.stderr, want)
	}
}

// traceFamily: the tracer follows the client's connection to the
// LoadBalancer IP of family f to a pod, and the kernel's trace agrees.
func traceFamily(t *testing.T, e *env, f ipfamily.Family) {
	ip := lbIPOf(t, e, "web", f)
	tr, out := verifyTrace(t, e, trace.Ask{From: "client", To: netip.AddrPortFrom(ip, 80).String()})
	if tr.Verdict.Kind != trace.Delivered {
		t.Fatalf("verdict %s (%s), want %s\n%s", tr.Verdict.Kind, tr.Verdict.Reason, trace.Delivered, out)
	}
	if src := tr.Request.Packet.Src.Addr(); ipfamily.Of(src) != f {
		t.Errorf("the client sent from %s, want its %s address\n%s", src, f, out)
	}
}

// noOtherFamily: in a single-family lab nothing has an address of the
// other family: a PreferDualStack Service gets one ClusterIP, a pod one
// address, and the pods' resolv.conf names the one cluster DNS address.
func noOtherFamily(t *testing.T, e *env, stack topology.Stack) {
	if ips := e.service("web-local").Spec.ClusterIPs; len(ips) != 1 {
		t.Errorf("web-local: clusterIPs %v, want the lab's one family", ips)
	}
	if ips := e.pod("web-1").Status.PodIPs; len(ips) != 1 {
		t.Errorf("web-1: podIPs %v, want the lab's one family", ips)
	}
	path := topology.ResolvConfPath(e.l.Names().Pod("default", "client-1"))
	conf, err := resolv.ReadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range stack.ClusterDNS() {
		want = append(want, netip.AddrPortFrom(a, 53).String())
	}
	if !slices.Equal(conf.Nameservers, want) {
		t.Errorf("%s: nameservers %v, want %v", path, conf.Nameservers, want)
	}
}

func texts[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
