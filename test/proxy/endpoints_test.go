package proxy_test

import (
	"slices"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
)

// TestTerminatingFallback: when every endpoint is terminating, those still
// serving take the traffic; when none serves, the Service has no endpoints
// and is rejected.
func TestTerminatingFallback(t *testing.T) {
	c := newCluster(t)
	a, b := c.addPod("pod-a", 11), c.addPod("pod-b", 12)
	client := c.addPod("client", 20)
	svc := newService("term", []string{"10.96.0.100"}, tcpPort(80), udpPort(80))
	c.apply(svc, v4(svc, terminatingEp(a, true), terminatingEp(b, true)))
	proxy := c.startProxy()

	for _, proto := range []string{"tcp", "udp"} {
		eventuallyAnswered(t, client.ns, proto, "10.96.0.100:80", a.name, b.name)
	}
	m := proxy.mark()
	c.apply(svc, v4(svc, terminatingEp(a, false), terminatingEp(b, false)))
	proxy.waitReload(t, m)
	for _, proto := range []string{"tcp", "udp"} {
		if r, err := req(client.ns, proto, "10.96.0.100:80", reqTimeout); outcome(err) != "refused" {
			t.Errorf("%s with only non-serving terminating endpoints: %s (%v), want refused", proto, outcome(err), r)
		}
	}
}

// TestNoEndpointsRejected: a Service without endpoints, and a port a
// ClusterIP does not serve, are rejected at once: TCP with a reset, UDP with
// ICMP port unreachable; from a pod (forwarded) and from the node (output).
func TestNoEndpointsRejected(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	client := c.addPod("client", 20)
	empty := newService("empty", []string{"10.96.0.110"}, tcpPort(80), udpPort(80))
	web := newService("web", []string{"10.96.0.111"}, tcpPort(80), udpPort(80))
	c.apply(empty, web, v4(web, local(a)))
	c.startProxy()
	eventuallyAnswered(t, client.ns, "tcp", "10.96.0.111:80", a.name)

	for _, from := range []struct {
		name string
		ns   *netns.NS
	}{{"pod", client.ns}, {"node", c.node}} {
		for _, tc := range []struct{ name, addr string }{
			{"no-endpoints", "10.96.0.110:80"},
			{"unknown-port", "10.96.0.111:81"},
		} {
			for _, proto := range []string{"tcp", "udp"} {
				t.Run(from.name+"/"+tc.name+"/"+proto, func(t *testing.T) {
					want := []string{"refused"}
					if from.name == "node" && proto == "udp" {
						// The node's own datagram is rejected in the output
						// path: sendmsg fails with EPERM (kube-proxy alike).
						want = append(want, "eperm")
					}
					start := time.Now()
					r, err := req(from.ns, proto, tc.addr, reqTimeout)
					if got := outcome(err); !slices.Contains(want, got) {
						t.Fatalf("%s: %s (%v %v), want %v", tc.addr, got, r, err, want)
					}
					// A drop would take the whole reqTimeout.
					if d := time.Since(start); d > time.Second {
						t.Errorf("refusal took %v, want immediate", d)
					}
				})
			}
		}
	}
}
