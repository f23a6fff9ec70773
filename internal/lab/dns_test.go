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
// the Service at ClusterDNS with the kube-dns port names, and, once the pod is
// ready, one EndpointSlice holding the pod on every port.
func TestClusterDNSObjects(t *testing.T) {
	pod := dnsPod()
	podIP := netip.MustParseAddr("192.168.1.2")
	pod.Status = cluster.PodStatus([]netip.Addr{podIP}, topology.NodeAddr(1), pod)
	objs := []controlplane.Object{
		{Origin: "node", Obj: cluster.Node(1)},
		{Origin: "svc", Obj: kubeDNSService()},
		{Origin: "pod", Obj: pod},
	}
	res := controlplane.Reconcile(cluster.NewFile(topology.Names{Lab: "x"}).Config(), objs, controlplane.State{}, time.Unix(0, 0))
	if len(res.Errors) > 0 {
		t.Fatalf("control plane rejected the lab's DNS objects: %v", res.Errors)
	}
	i := slices.IndexFunc(res.Services, func(s *corev1.Service) bool { return s.Namespace == DNSNamespace && s.Name == DNSService })
	if i < 0 {
		t.Fatalf("no Service %s/%s in %d Services", DNSNamespace, DNSService, len(res.Services))
	}
	svc := res.Services[i]
	if !slices.Equal(svc.Spec.ClusterIPs, []string{topology.ClusterDNS.String()}) {
		t.Errorf("kube-dns clusterIPs %v, want [%s]", svc.Spec.ClusterIPs, topology.ClusterDNS)
	}
	var gotPorts []string
	for _, p := range svc.Spec.Ports {
		gotPorts = append(gotPorts, p.Name+" "+string(p.Protocol)+" "+p.TargetPort.String())
	}
	if want := []string{"dns UDP 53", "dns-tcp TCP 53", "metrics TCP 9153"}; !slices.Equal(gotPorts, want) {
		t.Errorf("kube-dns ports %q, want %q", gotPorts, want)
	}
	var endpoints, ports []string
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
	if diff := cmp.Diff([]string{podIP.String() + " ready=true"}, endpoints); diff != "" {
		t.Errorf("kube-dns endpoints (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"dns UDP 53", "dns-tcp TCP 53", "metrics TCP 9153"}, ports); diff != "" {
		t.Errorf("kube-dns EndpointSlice ports (-want +got):\n%s", diff)
	}
}

// A pod's process is chosen by its image: svcnet dns with the proxies' state
// flags for DNSImage, svcnet echo on every containerPort otherwise.
func TestPodArgv(t *testing.T) {
	fc := cluster.NewFile(topology.Names{Lab: "x"})
	l := &Lab{c: &cluster.Cluster{Names: topology.Names{Lab: "x"}, Info: &cluster.Info{Binary: "/bin/svcnet"}, CP: fc}}
	ip := netip.MustParseAddr("192.168.2.7")

	wantDNS := []string{"/bin/svcnet", "dns", "--state", fc.PublishPath(), "--listen", ":53", "--metrics-bind-address", ":9153"}
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
