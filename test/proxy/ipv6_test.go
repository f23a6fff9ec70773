package proxy_test

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netns"
)

// TestDualStackIPv6: a dual-stack Service is reached over its IPv6 ClusterIP
// from a pod (TCP and UDP, endpoint sees the pod's own IPv6 address, or on
// the userspace plane the node's, seenAs), over
// its IPv4 ClusterIP too, and over the node's IPv6 NodePort from outside.
func TestDualStackIPv6(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	client := c.addPod("client", 20)
	svc := newService("dual", []string{"10.96.0.120", "fd00:96::120"}, tcpPort(80), udpPort(80))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = 30120
	svc.Spec.Ports[1].NodePort = 30120
	c.apply(svc,
		endpointSlice(svc, corev1.IPv4Protocol, local(a), local(b)),
		endpointSlice(svc, corev1.IPv6Protocol, local(a), local(b)))
	c.startProxy()

	for _, tc := range []struct {
		name, proto string
		addr        string
		from        *netns.NS
		wantSrc     netip.Addr
	}{
		{"clusterIP6/tcp", "tcp", "[fd00:96::120]:80", client.ns, seenAs(client.ip6)},
		{"clusterIP6/udp", "udp", "[fd00:96::120]:80", client.ns, seenAs(client.ip6)},
		{"clusterIP4/tcp", "tcp", "10.96.0.120:80", client.ns, seenAs(client.ip)},
		// From outside over IPv6: masqueraded to the node's pod-side address.
		{"nodePort6/tcp", "tcp", hostPort(nodeIP6, 30120), c.client, podGW6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eventuallyAnswered(t, tc.from, tc.proto, tc.addr)
			rs := requests(t, tc.from, tc.proto, tc.addr, 30)
			if src := sources(rs); len(src) != 1 || src[0] != tc.wantSrc {
				t.Errorf("endpoints saw %v, want only %v", src, tc.wantSrc)
			}
			if seen := byPod(rs); seen[a.name] == 0 || seen[b.name] == 0 {
				t.Errorf("30 requests reached %v, want both endpoints", seen)
			}
		})
	}
}
