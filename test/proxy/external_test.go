package proxy_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestNodePort: the client reaches node1's address on the NodePort (TCP and
// UDP), masqueraded under the Cluster policy; NodePorts are never served on
// 127.0.0.1 (CVE-2020-8558): a connection there from the node is refused,
// not DNATed.
func TestNodePort(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	svc := newService("np", []string{"10.96.0.20"}, tcpPort(80), udpPort(80))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.Ports[1].NodePort = 30080
	c.apply(svc, v4(svc, local(a), remote(b)))
	c.startProxy()

	for _, proto := range []string{"tcp", "udp"} {
		t.Run(proto, func(t *testing.T) {
			addr := hostPort(nodeIP, 30080)
			eventuallyAnswered(t, c.client, proto, addr)
			rs := requests(t, c.client, proto, addr, 10)
			if src := sources(rs); len(src) != 1 || src[0] != podGateway {
				t.Errorf("endpoints saw %v, want only the node's address %v (masqueraded)", src, podGateway)
			}
		})
	}
	t.Run("not-on-localhost", func(t *testing.T) {
		start := time.Now()
		_, err := tcpReq(c.node, "127.0.0.1:30080", 2*time.Second)
		if got := outcome(err); got != "refused" {
			t.Fatalf("NodePort on 127.0.0.1 from the node: %s (%v), want refused (nothing listens, no DNAT)", got, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("refusal took %v", d)
		}
		addrs, state := c.plane().nodePortAddrs()
		if slices.Contains(addrs, netip.MustParseAddr("127.0.0.1")) || !slices.Contains(addrs, nodeIP) {
			t.Errorf("NodePort addresses %v, want %s and never 127.0.0.1:\n%s", addrs, nodeIP, state)
		}
	})
}

// TestExternalIPs: traffic from outside to an externalIP is delivered,
// masqueraded under the Cluster policy. (LoadBalancer ingress IPs are tested
// in the kube tier, TestKube: the embedded control plane clears a manifest's
// status.loadBalancer, as kube-apiserver does on create.)
func TestExternalIPs(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	svc := newService("ext", []string{"10.96.0.40"}, tcpPort(80), udpPort(80))
	svc.Spec.ExternalIPs = []string{"172.26.236.190"}
	c.apply(svc, v4(svc, local(a)))
	c.startProxy()
	for _, proto := range []string{"tcp", "udp"} {
		t.Run(proto, func(t *testing.T) {
			r := eventuallyAnswered(t, c.client, proto, "172.26.236.190:80", a.name)
			if r.Src != podGateway {
				t.Errorf("endpoint saw %v, want the node's %v (Cluster policy masquerades)", r.Src, podGateway)
			}
		})
	}
}
