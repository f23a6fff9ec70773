package diagram

import (
	"net/netip"

	"github.com/svcnet/svcnet/internal/trace"
)

// Hand-built traces in the shape the tracer (package trace) produces for the
// lab's cluster: node1 172.26.236.177, node2 172.26.236.178 (pod CIDR
// 192.168.2.0/24), the external client 172.26.236.1.

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func tcp(src, dst string, mark uint32) trace.Tuple {
	return trace.Tuple{Proto: "tcp", Src: ap(src), Dst: ap(dst), Mark: mark}
}

func ptr(t trace.Tuple) *trace.Tuple { return &t }

var (
	client = trace.Place{Kind: trace.PlaceExternal, Name: "client", Addr: netip.MustParseAddr("172.26.236.1"), NetNS: "svcnet-client"}
	node1  = trace.Place{Kind: trace.PlaceNode, Name: "node1", Node: "node1", Addr: netip.MustParseAddr("172.26.236.177"), NetNS: "svcnet-node1"}
	node2  = trace.Place{Kind: trace.PlaceNode, Name: "node2", Node: "node2", Addr: netip.MustParseAddr("172.26.236.178"), NetNS: "svcnet-node2"}
	nginx  = trace.Place{Kind: trace.PlacePod, Name: "default/my-nginx-abc", Node: "node2", Addr: netip.MustParseAddr("192.168.2.5"), NetNS: "svcnet-node2-my-nginx-abc"}
)

// nodePortTrace: the client connects to node1's NodePort 30080; node1 picks
// the endpoint on node2 (DNAT) and masquerades (SNAT) since the packet leaves
// for another node; node2 bridges it to the pod; the reply comes back through
// node2 and node1, where conntrack translates it back (un-SNAT, un-DNAT).
func nodePortTrace() *trace.Trace {
	sent := tcp("172.26.236.1:41234", "172.26.236.177:30080", 0)
	dnatted := tcp("172.26.236.1:41234", "192.168.2.5:80", 0x4000)
	masq := tcp("172.26.236.177:41234", "192.168.2.5:80", 0x4000)
	atPod := tcp("172.26.236.177:41234", "192.168.2.5:80", 0)
	answer := tcp("192.168.2.5:80", "172.26.236.177:41234", 0)
	unSNAT := tcp("192.168.2.5:80", "172.26.236.1:41234", 0)
	unDNAT := tcp("172.26.236.177:30080", "172.26.236.1:41234", 0)
	marked := sent
	marked.Mark = 0x4000
	return &trace.Trace{
		Request: trace.Request{
			From: "client", To: "172.26.236.177:30080", Service: "default/my-nginx", Frontend: "NodePort",
			Packet: sent, EphemeralPort: true, Rules: "rendered",
			Notes: []string{"172.26.236.177 is node1's InternalIP: the packet enters the cluster at node1"},
		},
		Hops: []trace.Hop{
			{Place: client, Arrive: sent, Leave: ptr(sent), Route: &trace.Route{
				Text: "172.26.236.0/24 dev eth0", Dev: "eth0", Next: node1, Link: "node network → node1 eth0"}},
			{Place: node1, In: "eth0", Arrive: sent,
				Steps: []trace.Step{
					{Hook: "prerouting", Table: "svcnet", Chain: "nat-prerouting", Rule: 0, Text: "jump services", Action: "jump", Target: "services"},
					{Hook: "prerouting", Table: "svcnet", Chain: "external-4QBFOSPD-default/my-nginx/tcp/", Rule: 0, Text: "jump mark-for-masquerade", Action: "jump", Target: "mark-for-masquerade"},
					{Hook: "prerouting", Table: "svcnet", Chain: "endpoint-6OK3GZBM-default/my-nginx/tcp/__192.168.2.5/80", Rule: 1, Text: "meta l4proto tcp dnat to 192.168.2.5:80", Action: "dnat"},
					{Hook: "postrouting", Table: "svcnet", Chain: "masquerading", Rule: 1, Text: "masquerade fully-random", Action: "masquerade"},
				},
				Rewrites: []trace.Rewrite{
					{Kind: trace.RewriteDNAT, Hook: "prerouting", By: "svcnet endpoint-6OK3GZBM-default/my-nginx/tcp/__192.168.2.5/80 rule 1",
						Rule: "meta l4proto tcp dnat to 192.168.2.5:80", Before: marked, After: dnatted},
					{Kind: trace.RewriteSNAT, Hook: "postrouting", By: "svcnet masquerading rule 1 (masquerade)",
						Rule: "masquerade fully-random", Mark: 0x4000, Before: dnatted, After: masq},
				},
				Route: &trace.Route{Text: "192.168.2.0/24 via 172.26.236.178 dev eth0 proto 154", Dev: "eth0",
					Via: node2.Addr, Next: node2, Link: "eth0 → node network → node2 eth0"},
				Leave: ptr(masq)},
			{Place: node2, In: "eth0", Arrive: atPod,
				Steps: []trace.Step{{Hook: "prerouting", Table: "svcnet", Chain: "nat-prerouting", Rule: 0, Text: "jump services", Action: "jump", Target: "services"}},
				Route: &trace.Route{Text: "192.168.2.0/24 dev cni0 proto kernel scope link src 192.168.2.1", Dev: "cni0",
					Next: nginx, Link: "bridge cni0 → the pod's veth → default/my-nginx-abc eth0"},
				Leave: ptr(atPod)},
			{Place: nginx, In: "eth0", Arrive: atPod, End: "delivered to pod default/my-nginx-abc at 192.168.2.5:80"},
		},
		Reply: []trace.Hop{
			{Place: nginx, Arrive: answer, Leave: ptr(answer), Route: &trace.Route{
				Text: "default via 192.168.2.1 dev eth0 onlink", Dev: "eth0", Via: netip.MustParseAddr("192.168.2.1"),
				Next: node2, Link: "eth0 → veth → bridge cni0 of node2"}},
			{Place: node2, In: "veth (pod default/my-nginx-abc) on cni0", Arrive: answer, Leave: ptr(answer), Route: &trace.Route{
				Text: "172.26.236.0/24 dev eth0 proto kernel scope link src 172.26.236.178", Dev: "eth0",
				Next: node1, Link: "eth0 → node network → node1 eth0"}},
			{Place: node1, In: "eth0", Arrive: answer,
				Rewrites: []trace.Rewrite{
					{Kind: trace.RewriteReverseDst, Hook: "prerouting", By: "conntrack: reply of a masqueraded connection", Before: answer, After: unSNAT},
					{Kind: trace.RewriteReverseSrc, Hook: "postrouting", By: "conntrack: reply of a DNATed connection", Before: unSNAT, After: unDNAT},
				},
				Route: &trace.Route{Text: "172.26.236.0/24 dev eth0 proto kernel scope link src 172.26.236.177", Dev: "eth0",
					Next: client, Link: "eth0 → node network"},
				Leave: ptr(unDNAT)},
			{Place: client, In: "eth0", Arrive: unDNAT, End: "received by client"},
		},
		Choice: &trace.Choice{Node: "node1", Service: "default/my-nginx:80/tcp", Set: "cluster", Candidates: []trace.Candidate{
			{Endpoint: "192.168.1.4:80", Node: "node1", Pod: "default/my-nginx-xyz", Probability: "1/2", P: 0.5},
			{Endpoint: "192.168.2.5:80", Node: "node2", Pod: "default/my-nginx-abc", Probability: "1/2", P: 0.5, Chosen: true},
		}},
		Verdict: trace.Verdict{Kind: trace.Delivered, Place: "pod default/my-nginx-abc on node2", Reason: "to the pod's address"},
		Summary: trace.Summary{Rewrites: 2, ReplyRewrites: 2, NodeHops: 2},
	}
}

// droppedTrace: the client connects to the NodePort of a Service with
// externalTrafficPolicy Local on node1, which runs none of its endpoints:
// node1 drops the packet; there is no reply.
func droppedTrace() *trace.Trace {
	sent := tcp("172.26.236.1:50123", "172.26.236.177:30081", 0)
	rule := `meta l4proto tcp counter drop comment "no local endpoints"`
	reason := "no local endpoints: traffic policy Local keeps the packet on this node, and there is no endpoint here" +
		" [svcnet external-JGSQYRSA-default/my-nginx-local/tcp/ rule 0: " + rule + "]"
	return &trace.Trace{
		Request: trace.Request{
			From: "client", To: "172.26.236.177:30081", Service: "default/my-nginx-local", Frontend: "NodePort",
			Packet: sent, EphemeralPort: true, Rules: "kernel",
		},
		Hops: []trace.Hop{
			{Place: client, Arrive: sent, Leave: ptr(sent), Route: &trace.Route{
				Text: "172.26.236.0/24 dev eth0", Dev: "eth0", Next: node1, Link: "node network → node1 eth0"}},
			{Place: node1, In: "eth0", Arrive: sent,
				Steps: []trace.Step{
					{Hook: "prerouting", Table: "svcnet", Chain: "nat-prerouting", Rule: 0, Text: "jump services", Action: "jump", Target: "services"},
					{Hook: "prerouting", Table: "svcnet", Chain: "external-JGSQYRSA-default/my-nginx-local/tcp/", Rule: 0, Text: rule, Action: "drop"},
				},
				End: "dropped: " + reason},
		},
		Verdict: trace.Verdict{Kind: trace.Dropped, Place: "node node1", Reason: reason},
		Summary: trace.Summary{Rewrites: 0, NodeHops: 1},
	}
}
