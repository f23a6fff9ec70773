package diagram

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/trace"
)

// socketTrace: a pod on node1 connects to a ClusterIP; the socket load
// balancer (--data-plane ebpf) connects it to the endpoint on node2 at
// connect(), so the packet leaves the pod with the endpoint's address.
func socketTrace() *trace.Trace {
	client := trace.Place{Kind: trace.PlacePod, Name: "default/client", Node: "node1", Addr: netip.MustParseAddr("192.168.1.20")}
	dialled := tcp("192.168.1.20:41234", "10.96.0.10:80", 0)
	sent := tcp("192.168.1.20:41234", "192.168.2.5:80", 0)
	return &trace.Trace{
		Request: trace.Request{From: "default/client", To: "default/my-nginx", Service: "default/my-nginx", Frontend: "ClusterIP", Packet: dialled, Rules: "rendered"},
		Hops: []trace.Hop{
			{Place: client, Arrive: sent, Leave: ptr(sent), Route: &trace.Route{Text: "default via 192.168.1.1 dev eth0", Dev: "eth0", Next: node1}},
			{Place: node1, In: "veth", Arrive: sent, Leave: ptr(sent), Route: &trace.Route{Text: "192.168.2.0/24 via 172.26.236.178 dev eth0", Dev: "eth0", Next: node2}},
			{Place: node2, In: "eth0", Arrive: sent, Leave: ptr(sent), Route: &trace.Route{Text: "192.168.2.0/24 dev cni0", Dev: "cni0", Next: nginx}},
			{Place: nginx, In: "eth0", Arrive: sent, End: "delivered to pod default/my-nginx-abc at 192.168.2.5:80"},
		},
		Choice: &trace.Choice{Node: "node1", Service: "default/my-nginx:80/tcp", Set: "cluster", Socket: true, Candidates: []trace.Candidate{
			{Endpoint: "192.168.2.5:80", Pod: "default/my-nginx-abc", Node: "node2", Probability: "1", P: 1, Chosen: true}}},
		Socket: &trace.SocketLB{Hook: "cgroup connect4", Node: "node1", Frontend: ap("10.96.0.10:80"), Proto: "tcp", Service: "default/my-nginx:80/tcp",
			Kind: "ClusterIP", Set: "cluster", Held: true, Backends: []netip.AddrPort{ap("192.168.2.5:80")}, Backend: ap("192.168.2.5:80"), Sent: ptr(sent)},
		Verdict: trace.Verdict{Kind: trace.Delivered, Place: "pod default/my-nginx-abc on node2", Reason: "to the pod's address"},
		Summary: trace.Summary{NodeHops: 2},
	}
}

// TestSocketChoiceAtSender: a choice the socket load balancer made at
// connect() is drawn at the sender, named as the socket load balancer's,
// not at the sender's node, where no rule chose.
func TestSocketChoiceAtSender(t *testing.T) {
	tr := socketTrace()
	if i := choiceHop(tr); i != 0 {
		t.Errorf("choice drawn at hop %d, want the sender's (0)", i)
	}
	out := Mermaid(tr)
	want := "Note over P1: socket load balancer's endpoint choice for default/my-nginx:80/tcp at connect() on node1"
	if !strings.Contains(mmDecode(out), want) {
		t.Errorf("Mermaid lacks %q:\n%s", want, out)
	}
	if svg := string(SVG(tr)); !strings.Contains(svg, "socket load balancer&#39;s endpoint choice") && !strings.Contains(svg, "socket load balancer's endpoint choice") {
		t.Errorf("SVG lacks the socket load balancer's choice")
	}
}
