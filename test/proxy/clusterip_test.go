package proxy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netns"
)

// TestClusterIPFromPod: a pod reaches a ClusterIP over TCP and UDP, the
// endpoint sees the pod's own address (no masquerade; on the userspace
// plane the node's, seenAs), and 60 requests spread over all 3 endpoints.
func TestClusterIPFromPod(t *testing.T) {
	c := newCluster(t)
	a, b, d := c.addPod("pod-a", 11), c.addPod("pod-b", 12), c.addPod("pod-d", 13)
	client := c.addPod("client", 20)
	svc := newService("web", []string{"10.96.0.10"}, tcpPort(80), udpPort(80))
	c.apply(svc, v4(svc, local(a), local(b), remote(d)))
	c.startProxy()

	for _, proto := range []string{"tcp", "udp"} {
		t.Run(proto, func(t *testing.T) {
			addr := "10.96.0.10:80"
			eventuallyAnswered(t, client.ns, proto, addr)
			rs := requests(t, client.ns, proto, addr, 60)
			if src := sources(rs); len(src) != 1 || src[0] != seenAs(client.ip) {
				t.Errorf("endpoints saw client addresses %v, want only %v (the pod %v as the plane delivers it)", src, seenAs(client.ip), client.ip)
			}
			seen := byPod(rs)
			for _, p := range []*pod{a, b, d} {
				if seen[p.name] == 0 {
					t.Errorf("60 requests never reached %s: %v", p.name, seen)
				}
			}
		})
	}
}

// TestClusterIPFromNodeAndOutside: host-originated traffic and traffic from
// an off-cluster client routed through the node reach the ClusterIP, and are
// masqueraded: the endpoint sees the node's address.
func TestClusterIPFromNodeAndOutside(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	svc := newService("web", []string{"10.96.0.10"}, tcpPort(80), udpPort(80))
	c.apply(svc, v4(svc, local(a)))
	c.startProxy()

	for _, tc := range []struct {
		name, proto string
		from        *netns.NS
	}{
		{"node/tcp", "tcp", c.node},
		{"node/udp", "udp", c.node},
		{"client/tcp", "tcp", c.client},
		{"client/udp", "udp", c.client},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := eventuallyAnswered(t, tc.from, tc.proto, "10.96.0.10:80", a.name)
			if r.Src != podGateway {
				t.Errorf("endpoint saw %v, want the node's address %v (masqueraded)", r.Src, podGateway)
			}
		})
	}
}

// TestHairpin: a pod reaching its own Service lands on itself, masqueraded
// (else its reply would bypass the node's un-DNAT).
func TestHairpin(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	svc := newService("self", []string{"10.96.0.90"}, tcpPort(80), udpPort(80))
	c.apply(svc, v4(svc, local(a)))
	c.startProxy()
	for _, proto := range []string{"tcp", "udp"} {
		t.Run(proto, func(t *testing.T) {
			r := eventuallyAnswered(t, a.ns, proto, "10.96.0.90:80", a.name)
			if r.Src != podGateway {
				t.Errorf("hairpin: pod saw itself as %v, want the node's %v (masqueraded)", r.Src, podGateway)
			}
		})
	}
}

// TestSessionAffinityClientIP: with sessionAffinity ClientIP, all requests of
// one client go to one endpoint, for a pod and for an outside client.
func TestSessionAffinityClientIP(t *testing.T) {
	c := newCluster(t)
	a, b, d := c.addPod("pod-a", 11), c.addPod("pod-b", 12), c.addPod("pod-d", 13)
	client := c.addPod("client", 20)
	svc := newService("sticky", []string{"10.96.0.80"}, tcpPort(80))
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	c.apply(svc, v4(svc, local(a), local(b), remote(d)))
	c.startProxy()
	for _, tc := range []struct {
		name string
		from *netns.NS
	}{
		{"pod", client.ns},
		{"outside", c.client},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eventuallyAnswered(t, tc.from, "tcp", "10.96.0.80:80")
			if seen := byPod(requests(t, tc.from, "tcp", "10.96.0.80:80", 20)); len(seen) != 1 {
				t.Errorf("20 requests from one client reached %v, want one endpoint", seen)
			}
		})
	}
}
