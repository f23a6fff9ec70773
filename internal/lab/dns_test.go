package lab

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// The lab's kube-dns Service and DNS pod, as a control plane takes them: valid,
// the Service at the stack's cluster DNS addresses with the kube-dns port
// names, and, once the pod is ready, an EndpointSlice per family holding the
// pod on every port.
func TestClusterDNSObjects(t *testing.T) {
	for _, family := range []string{topology.StackIPv4, topology.StackIPv6, topology.StackDual} {
		t.Run(family, func(t *testing.T) { testClusterDNSObjects(t, family) })
	}
}

func testClusterDNSObjects(t *testing.T, family string) {
	stack, err := topology.ParseStack(family)
	if err != nil {
		t.Fatal(err)
	}
	pod := dnsPod()
	var podIPs, wantEndpoints []string
	var ips []netip.Addr
	for _, c := range stack.PodCIDRs(1) {
		ip := c.Addr().Next().Next()
		ips = append(ips, ip)
		podIPs = append(podIPs, ip.String())
		wantEndpoints = append(wantEndpoints, ip.String()+" ready=true")
	}
	pod.Status = cluster.PodStatus(ips, stack.NodeAddr(1), pod)
	objs := []controlplane.Object{
		{Origin: "node", Obj: cluster.Node(stack, 1)},
		{Origin: "svc", Obj: kubeDNSService(stack)},
		{Origin: "pod", Obj: pod},
	}
	res := controlplane.Reconcile(cluster.NewFile(topology.Names{Lab: "x"}, stack).Config(), objs, controlplane.State{}, time.Unix(0, 0))
	if len(res.Errors) > 0 {
		t.Fatalf("control plane rejected the lab's DNS objects: %v", res.Errors)
	}
	i := slices.IndexFunc(res.Services, func(s *corev1.Service) bool { return s.Namespace == DNSNamespace && s.Name == DNSService })
	if i < 0 {
		t.Fatalf("no Service %s/%s in %d Services", DNSNamespace, DNSService, len(res.Services))
	}
	svc := res.Services[i]
	var wantIPs []string
	for _, a := range stack.ClusterDNS() {
		wantIPs = append(wantIPs, a.String())
	}
	if !slices.Equal(svc.Spec.ClusterIPs, wantIPs) || svc.Spec.ClusterIP != wantIPs[0] {
		t.Errorf("kube-dns clusterIP %s, clusterIPs %v, want %v", svc.Spec.ClusterIP, svc.Spec.ClusterIPs, wantIPs)
	}
	var gotPorts []string
	for _, p := range svc.Spec.Ports {
		gotPorts = append(gotPorts, p.Name+" "+string(p.Protocol)+" "+p.TargetPort.String())
	}
	if want := []string{"dns UDP 53", "dns-tcp TCP 53", "metrics TCP 9153"}; !slices.Equal(gotPorts, want) {
		t.Errorf("kube-dns ports %q, want %q", gotPorts, want)
	}
	var endpoints []string
	var ports []string
	for _, s := range res.EndpointSlices {
		if s.Namespace != DNSNamespace || s.Labels["kubernetes.io/service-name"] != DNSService {
			continue
		}
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready != nil && *ep.Conditions.Ready
			for _, a := range ep.Addresses {
				endpoints = append(endpoints, fmt.Sprintf("%s ready=%v", a, ready))
			}
		}
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s %s %d", *p.Name, *p.Protocol, *p.Port))
		}
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	slices.Sort(endpoints)
	slices.Sort(wantEndpoints)
	if diff := cmp.Diff(wantEndpoints, endpoints); diff != "" {
		t.Errorf("kube-dns endpoints of pod %v (-want +got):\n%s", podIPs, diff)
	}
	if diff := cmp.Diff([]string{"dns UDP 53", "dns-tcp TCP 53", "metrics TCP 9153"}, ports); diff != "" {
		t.Errorf("kube-dns EndpointSlice ports (-want +got):\n%s", diff)
	}
}

// A pod's process is chosen by its image: svcnet dns with the proxies' state
// flags for DNSImage, svcnet echo on every containerPort otherwise.
func TestPodArgv(t *testing.T) {
	fc := cluster.NewFile(topology.Names{Lab: "x"}, nil)
	l := &Lab{c: &cluster.Cluster{Names: topology.Names{Lab: "x"}, Info: &cluster.Info{Binary: "/bin/svcnet"}, CP: fc}}
	ip := netip.MustParseAddr("192.168.2.7")

	wantDNS := []string{"/bin/svcnet", "dns", "--state", fc.PublishPath(), "--service-cluster-ip-range", "10.96.0.0/12", "--listen", ":53", "--metrics-bind-address", ":9153"}
	if diff := cmp.Diff(wantDNS, l.podArgv(dnsPod(), ip)); diff != "" {
		t.Errorf("DNS pod argv (-want +got):\n%s", diff)
	}

	echo := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "node2", Containers: []corev1.Container{{
		Image: "svcnet-echo",
		Ports: []corev1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
	}}}}
	echo.Name = "web-1"
	wantEcho := []string{"/bin/svcnet", "echo", "--name", "web-1", "--node", "node2", "--pod-ip", "192.168.2.7", "--tcp", "80", "--tcp", "8080", "--udp", "53"}
	if diff := cmp.Diff(wantEcho, l.podArgv(echo, ip)); diff != "" {
		t.Errorf("echo pod argv (-want +got):\n%s", diff)
	}
	if isDNSPod(echo) || !isDNSPod(dnsPod()) {
		t.Errorf("isDNSPod: echo %v, dns %v; want false, true", isDNSPod(echo), isDNSPod(dnsPod()))
	}
}

// The lab's pool has a range of each of the lab's families, in the Stack's
// order, and InPool knows both.
func TestDefaultPoolFamilies(t *testing.T) {
	for family, want := range map[string][]string{
		topology.StackIPv4: {PoolRange},
		topology.StackIPv6: {PoolRange6},
		topology.StackDual: {PoolRange, PoolRange6},
	} {
		s, err := topology.ParseStack(family)
		if err != nil {
			t.Fatal(err)
		}
		if got := defaultPool(s).Spec.Addresses; !slices.Equal(got, want) {
			t.Errorf("%s: pool addresses %v, want %v", family, got, want)
		}
	}
	for _, ip := range []string{"172.26.236.180", "172.26.236.199", "fd00:26:236::b4", "fd00:26:236::c7"} {
		if !InPool(netip.MustParseAddr(ip)) {
			t.Errorf("InPool(%s) = false", ip)
		}
	}
	for _, ip := range []string{"172.26.236.200", "fd00:26:236::b3", "fd00:26:236::c8", "fd00:26:236::b1"} {
		if InPool(netip.MustParseAddr(ip)) {
			t.Errorf("InPool(%s) = true", ip)
		}
	}
	if got := topology.Twin6(netip.MustParseAddr("172.26.236.199")); got != netip.MustParseAddr("fd00:26:236::c7") {
		t.Errorf("the v6 pool's end %s is not the twin of the v4 pool's", got)
	}
}
