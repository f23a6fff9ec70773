package proxy_test

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/source/file"
)

// TestManifestsAcceptedByControlPlane checks the harness's own builders
// without root: every kind of object the tests write passes the embedded
// control plane unchanged, so a kernel test never fails on a typo in its
// manifests.
func TestManifestsAcceptedByControlPlane(t *testing.T) {
	a := &pod{name: "pod-a", ip: netip.MustParseAddr("192.168.1.11"), ip6: netip.MustParseAddr("fd00:192:168:1::b")}
	b := &pod{name: "pod-b", ip: netip.MustParseAddr("192.168.1.12"), ip6: netip.MustParseAddr("fd00:192:168:1::c")}
	web := newService("web", []string{"10.96.0.10"}, tcpPort(80), udpPort(80))
	dual := newService("dual", []string{"10.96.0.120", "fd00:96::120"}, tcpPort(80))
	dual.Spec.Type = corev1.ServiceTypeNodePort
	dual.Spec.Ports[0].NodePort = 30120
	lb := newService("lb", []string{"10.96.0.60"}, tcpPort(80))
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	lb.Spec.HealthCheckNodePort = 30061
	lb.Spec.ExternalIPs = []string{"172.26.236.190"}
	lb.Spec.LoadBalancerSourceRanges = []string{"172.26.236.10/32"}
	proxyMode := corev1.LoadBalancerIPModeProxy
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.26.236.183"}, {IP: "172.26.236.181", IPMode: &proxyMode}}
	sctp := newService("sctp", []string{"10.96.0.130"}, svcPort(corev1.ProtocolSCTP, 9999))
	dns := newService("dns", []string{"10.96.0.140"}, udpPort(53))
	dns.Spec.Selector = map[string]string{"app": "dns"}

	dir := t.TempDir()
	writeManifests(t, dir, append(nodes(),
		web, v4(web, local(a), remote(b)),
		dual, endpointSlice(dual, corev1.IPv4Protocol, local(a)), endpointSlice(dual, corev1.IPv6Protocol, terminatingEp(b, true)),
		lb, v4(lb, local(a)),
		sctp, v4(sctp, local(b)),
		dns, podObject(a, nodeName, map[string]string{"app": "dns"}, true),
	)...)
	cfg := controlplane.DefaultConfig()
	cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, netip.MustParsePrefix("fd00:96::/108"))
	l, err := file.Load(file.Options{Path: dir, Config: cfg, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Errors {
		t.Errorf("control plane refused: %v", e)
	}
	// 5 Services plus default/kubernetes; 5 hand-written slices plus 1 from the Pod.
	if len(l.Services) != 6 || len(l.EndpointSlices) != 6 {
		t.Errorf("loaded %d Services and %d EndpointSlices, want 6 and 6", len(l.Services), len(l.EndpointSlices))
	}
	for _, s := range l.API.Services {
		if s.Name == "web" && s.Spec.ClusterIP != "10.96.0.10" {
			t.Errorf("web's clusterIP %s, want 10.96.0.10 as written", s.Spec.ClusterIP)
		}
	}
}
