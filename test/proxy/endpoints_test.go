package proxy_test

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	iptplane "github.com/svcnet/svcnet/internal/dataplane/iptables"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/testbin"
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

// TestNoEndpointsRejected: a Service without endpoints is rejected at once:
// TCP with a reset, UDP with ICMP port unreachable; from a pod (forwarded)
// and from the node (output). A port a ClusterIP does not serve is
// rejected the same way on the nftables plane; on the iptables plane it is
// not (unknownPortRejected), and the test checks what happens instead.
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
					if tc.name == "unknown-port" && !unknownPortRejected() {
						unknownPortUntranslated(t, c, from.ns, proto, tc.addr)
						return
					}
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

// unknownPortRejected reports whether the plane under test rejects traffic
// to a port a ClusterIP does not serve. The nftables plane does (a ClusterIP
// is a Service's, all its ports); the iptables plane does not, as
// kube-proxy's iptables mode: it would cost a rule per ClusterIP in the
// chain every new connection walks (internal/dataplane/iptables/doc.go).
func unknownPortRejected() bool { return testbin.DataPlane() != iptplane.Name }

// unknownPortUntranslated checks what a client sees at a port a ClusterIP
// does not serve on a plane that does not reject it: the packet matches no
// rule, so it is neither translated nor answered by the node; it leaves by
// the node's routes, as any packet to an address nobody holds. Here that is
// the default route to a router that does not exist: no answer within
// reqTimeout, or host unreachable once the node's neighbour resolution of
// the router fails (3s after an earlier packet started it). The node's
// conntrack shows the flow untranslated.
func unknownPortUntranslated(t *testing.T, c *cluster, ns *netns.NS, proto, addr string) {
	r, err := req(ns, proto, addr, reqTimeout)
	if got := outcome(err); got != "timeout" && got != "unreachable" {
		t.Fatalf("%s: %s (%v %v), want no answer (timeout or unreachable): not a Service port", addr, got, r, err)
	}
	ap := netip.MustParseAddrPort(addr)
	ct := c.mustNode("conntrack", "-L", "-p", proto, "-d", ap.Addr().String())
	found := false
	for _, line := range strings.Split(ct, "\n") {
		orig, reply := conntrackTuples(line)
		if orig["dst"] != ap.Addr().String() || orig["dport"] != strconv.Itoa(int(ap.Port())) {
			continue
		}
		found = true
		if reply["src"] != orig["dst"] || reply["sport"] != orig["dport"] {
			t.Errorf("the flow to %s was translated: %s", addr, line)
		}
	}
	if !found {
		t.Errorf("node conntrack has no flow to %s:\n%s", addr, ct)
	}
}

// conntrackTuples returns the original and reply tuples of a `conntrack -L`
// line (src, dst, sport, dport), empty for other lines.
func conntrackTuples(line string) (orig, reply map[string]string) {
	orig, reply = map[string]string{}, map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		if _, seen := orig[k]; seen {
			if _, seen := reply[k]; !seen {
				reply[k] = v
			}
			continue
		}
		orig[k] = v
	}
	return orig, reply
}
