package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/source/file"
	"github.com/svcnet/svcnet/internal/trace"
)

// The scenario tests trace packets through rulesets rendered from the
// manifests in testdata/cluster (three dual-stack nodes, one Service per
// feature of kube-proxy's feature table) and check what the tracer says
// against what kube-proxy does: the places the packet passes, every rewrite
// on the way in and back, the endpoint choice and its probabilities, whether
// the client address reaches the pod, and why a packet that is not delivered
// ends where it does.

const scenarioDir = "testdata/cluster"

var (
	clientAddr = netip.MustParseAddr("172.26.236.10")
	gateway    = netip.MustParseAddr("172.26.236.1")
)

// ephemeralPick is what Ask.Rand returns: the source port is 32768+1000.
const (
	ephemeralPick = 1000
	ephemeralPort = 32768 + ephemeralPick
)

// loadScenario loads the fixture through the embedded control plane as
// `svcnet trace --state` does, then writes back the Services'
// status.loadBalancer from the manifests, as a load-balancer controller
// would: the control plane, like the apiserver on create, clears status.
func loadScenario(t *testing.T) *model.Snapshot {
	t.Helper()
	ports, err := controlplane.ParsePortRange("30000-32767")
	if err != nil {
		t.Fatalf("node port range: %v", err)
	}
	cfg := controlplane.Config{
		ServiceCIDRs:  []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")},
		NodePortRange: ports,
	}
	l, err := file.Load(file.Options{Path: scenarioDir, StatePath: filepath.Join(t.TempDir(), "state.json"), ReadOnly: true, Config: cfg})
	if err != nil {
		t.Fatalf("load %s: %v", scenarioDir, err)
	}
	for _, e := range l.Errors {
		t.Errorf("fixture: %v", e)
	}
	objs, errs, err := file.ReadManifests(scenarioDir)
	if err != nil || len(errs) > 0 {
		t.Fatalf("read %s: %v %v", scenarioDir, err, errs)
	}
	written := map[string]corev1.ServiceStatus{}
	for _, o := range objs {
		if s, ok := o.Obj.(*corev1.Service); ok {
			written[s.Namespace+"/"+s.Name] = s.Status
		}
	}
	for _, s := range l.API.Services {
		s.Status = written[s.Namespace+"/"+s.Name]
	}
	snap := file.FromResult(l.API, "").Snapshot()
	lb := snap.Service(model.ServiceKey{Namespace: "default", Name: "lb"})
	if lb == nil || len(lb.Service.LoadBalancerIngress) != 2 {
		t.Fatalf("fixture: Service default/lb should carry its two LoadBalancer ingresses, has %+v", lb)
	}
	return snap
}

// scenarioNetwork is the lab's network: the client and gateway on the node
// network 172.26.236.0/24 (fd00:26:236::/64).
func scenarioNetwork(snap *model.Snapshot) *trace.Network {
	net := trace.NetworkFrom(snap, map[string][]netip.Addr{"client": {clientAddr}}, []netip.Addr{gateway}, nil)
	net.NodeNetworks = []netip.Prefix{netip.MustParsePrefix("172.26.236.0/24"), netip.MustParsePrefix("fd00:26:236::/64")}
	return net
}

// candWant is an expected endpoint candidate.
type candWant struct {
	endpoint    string
	prob        string
	terminating bool
}

// choiceWant is an expected endpoint choice.
type choiceWant struct {
	node     string // where the choice is made
	set      string // "cluster" or "local" (a prefix of Choice.Set)
	fallback bool   // the serving-and-terminating fallback
	affinity bool   // sessionAffinity ClientIP recorded
	socket   bool   // made by the socket load balancer at connect()
	cands    []candWant
}

// scenario is one row: a request and what kube-proxy does with it.
type scenario struct {
	name     string
	ask      trace.Ask
	endpoint string // Options.Endpoint: the candidate to follow ("" the first)

	service, frontend string // Request.Service, Request.Frontend
	proto             string // the packet's protocol

	verdict trace.VerdictKind // at the last hop's place
	reason  []string          // phrases Verdict.Reason must contain

	places []string // every hop's Place.String(), in order
	in     []string // rewrites on the way in, "KIND at PLACE-NAME", in order
	back   []string // rewrites of the reply, "KIND at PLACE-NAME", in order
	choice *choiceWant
	// podSrc is the source address the receiving pod sees ("" when the packet
	// does not reach a pod): the client's own address when it is preserved.
	podSrc string
	// leaves: the packet leaves the cluster, where the tracer cannot follow
	// it or its reply.
	leaves bool
	// opts edits the trace options (svcnet proxy's settings the rendered
	// rules follow); nil keeps the lab's.
	opts func(o *trace.Options)
}

func scenarios() []scenario {
	web := []candWant{{"192.168.1.10:8080", "1/2", false}, {"192.168.2.10:8080", "1/2", false}}
	return []scenario{
		{
			name: "ClusterIP from a pod to an endpoint on its node",
			ask:  trace.Ask{From: "client-1", To: "default/web"},
			// The pod's address reaches the endpoint: no masquerade.
			service: "default/web", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/client-1 on node1", "node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node1"}, back: []string{"un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: web},
			podSrc: "192.168.1.20",
		},
		{
			name:    "ClusterIP from a pod to an endpoint on another node",
			ask:     trace.Ask{From: "default/client-3:40000", To: "default/web:http"},
			service: "default/web", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/client-3 on node3", "node node3", "node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node3"}, back: []string{"un-DNAT at node3"},
			choice: &choiceWant{node: "node3", set: "cluster", cands: web},
			podSrc: "192.168.3.20",
		},
		{
			// Host-network traffic is not from the cluster CIDR: the
			// services chain masquerades it (as kube-proxy's
			// `! -s CLUSTER-CIDR` rule does in the OUTPUT path), to the
			// address the packet leaves node1 with: the bridge address
			// towards its own pods.
			name: "ClusterIP from a node (host network) to an endpoint on it", ask: trace.Ask{From: "node1", To: "default/web"},
			service: "default/web", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node1", "SNAT at node1"}, back: []string{"un-SNAT at node1", "un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: web},
			podSrc: "192.168.1.1",
		},
		{
			// Towards another node the masquerade address is the node's
			// own, which the packet already has: no address changes.
			name: "ClusterIP from a node (host network) to an endpoint on another node", ask: trace.Ask{From: "node1", To: "default/web"},
			endpoint: "192.168.2.10:8080",
			service:  "default/web", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"node node1", "node node2", "pod default/web-2 on node2"},
			in:     []string{"DNAT at node1"}, back: []string{"un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: web},
			podSrc: "172.26.236.177",
		},
		{
			name: "ClusterIP from off-cluster is masqueraded", ask: trace.Ask{From: "client", To: "default/web", Node: "node1"},
			service: "default/web", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"client", "node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node1", "SNAT at node1"}, back: []string{"un-SNAT at node1", "un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: web},
			podSrc: "192.168.1.1",
		},
		{
			name: "unknown port of a ClusterIP is rejected", ask: trace.Ask{From: "client-1", To: "10.96.0.10:81"},
			proto: "tcp", verdict: trace.Rejected, reason: []string{"tcp reset", "no Service port matches"},
			places: []string{"pod default/client-1 on node1", "node node1"},
		},
		{
			// externalTrafficPolicy Cluster masquerades even when the
			// endpoint is on the entry node.
			name: "NodePort (Cluster) on a node with an endpoint", ask: trace.Ask{From: "client", To: "node2:30080"},
			endpoint: "192.168.2.10:8080",
			service:  "default/np", frontend: "NodePort", proto: "tcp", verdict: trace.Delivered,
			places: []string{"client", "node node2", "pod default/web-2 on node2"},
			in:     []string{"DNAT at node2", "SNAT at node2"}, back: []string{"un-SNAT at node2", "un-DNAT at node2"},
			choice: &choiceWant{node: "node2", set: "cluster", cands: web},
			podSrc: "192.168.2.1",
		},
		{
			name: "NodePort (Cluster) on a node without an endpoint", ask: trace.Ask{From: "client", To: "node3:30080"},
			service: "default/np", frontend: "NodePort", proto: "tcp", verdict: trace.Delivered,
			places: []string{"client", "node node3", "node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node3", "SNAT at node3"}, back: []string{"un-SNAT at node3", "un-DNAT at node3"},
			choice: &choiceWant{node: "node3", set: "cluster", cands: web},
			podSrc: "172.26.236.179",
		},
		{
			name: "NodePort (Local) on the node with the endpoint keeps the client IP", ask: trace.Ask{From: "client", To: "node2:30081"},
			service: "default/np-local", frontend: "NodePort", proto: "tcp", verdict: trace.Delivered,
			places: []string{"client", "node node2", "pod default/local-2 on node2"},
			in:     []string{"DNAT at node2"}, back: []string{"un-DNAT at node2"},
			choice: &choiceWant{node: "node2", set: "local", cands: []candWant{{"192.168.2.11:8080", "1", false}}},
			podSrc: "172.26.236.10",
		},
		{
			name: "NodePort (Local) on a node without a local endpoint drops", ask: trace.Ask{From: "client", To: "node1:30081"},
			service: "default/np-local", frontend: "NodePort", proto: "tcp", verdict: trace.Dropped, reason: []string{"no local endpoints"},
			places: []string{"client", "node node1"},
		},
		{
			// Pod traffic to a Local NodePort short-circuits to the
			// cluster endpoints, unmasqueraded.
			name: "NodePort (Local) from a pod short-circuits to any endpoint", ask: trace.Ask{From: "client-1", To: "node1:30081"},
			service: "default/np-local", frontend: "NodePort", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/client-1 on node1", "node node1", "node node2", "pod default/local-2 on node2"},
			in:     []string{"DNAT at node1"}, back: []string{"un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: []candWant{{"192.168.2.11:8080", "1", false}}},
			podSrc: "192.168.1.20",
		},
		{
			// Traffic from the node itself to a Local NodePort is
			// masqueraded and short-circuits to the cluster endpoints.
			name: "NodePort (Local) from the node itself short-circuits, masqueraded", ask: trace.Ask{From: "node1", To: "node1:30081"},
			service: "default/np-local", frontend: "NodePort", proto: "tcp", verdict: trace.Delivered,
			places: []string{"node node1", "node node2", "pod default/local-2 on node2"},
			in:     []string{"DNAT at node1"}, back: []string{"un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: []candWant{{"192.168.2.11:8080", "1", false}}},
			podSrc: "172.26.236.177",
		},
		{
			name: "LoadBalancer IP from inside loadBalancerSourceRanges", ask: trace.Ask{From: "client", To: "default/lb", Node: "node1"},
			service: "default/lb", frontend: "LoadBalancer IP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"client", "node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node1", "SNAT at node1"}, back: []string{"un-SNAT at node1", "un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: web},
			podSrc: "192.168.1.1",
		},
		{
			name: "LoadBalancer IP from outside loadBalancerSourceRanges is filtered", ask: trace.Ask{From: "172.26.236.99", To: "default/lb", Node: "node1"},
			service: "default/lb", frontend: "LoadBalancer IP", proto: "tcp", verdict: trace.Filtered, reason: []string{"loadBalancerSourceRanges"},
			places: []string{"172.26.236.99", "node node1"},
		},
		{
			name: "the LoadBalancer's NodePort is not filtered by source ranges", ask: trace.Ask{From: "172.26.236.99:5000", To: "node1:30082"},
			service: "default/lb", frontend: "NodePort", proto: "tcp", verdict: trace.Delivered,
			places: []string{"172.26.236.99", "node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node1", "SNAT at node1"}, back: []string{"un-SNAT at node1", "un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: web},
			podSrc: "192.168.1.1",
		},
		{
			// ipMode Proxy: the load balancer proxies to the nodes, so
			// the node must not capture the IP; a packet to it that
			// reaches node1 is forwarded on, untranslated, to its owner
			// on the node network, which answers the client directly.
			name: "LoadBalancer IP with ipMode Proxy is not captured", ask: trace.Ask{From: "client", To: "172.26.236.201:80", Node: "node1"},
			service: "default/lb", frontend: "LoadBalancer IP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"client", "node node1", "172.26.236.201"},
		},
		{
			name: "externalIP", ask: trace.Ask{From: "client", To: "default/ext", Node: "node2"},
			service: "default/ext", frontend: "externalIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"client", "node node2", "node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node2", "SNAT at node2"}, back: []string{"un-SNAT at node2", "un-DNAT at node2"},
			choice: &choiceWant{node: "node2", set: "cluster", cands: web},
			podSrc: "172.26.236.178",
		},
		{
			name: "internalTrafficPolicy Local with a local endpoint", ask: trace.Ask{From: "client-2", To: "default/itp-local"},
			service: "default/itp-local", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/client-2 on node2", "node node2", "pod default/local-2 on node2"},
			in:     []string{"DNAT at node2"}, back: []string{"un-DNAT at node2"},
			choice: &choiceWant{node: "node2", set: "local", cands: []candWant{{"192.168.2.11:8080", "1", false}}},
			podSrc: "192.168.2.20",
		},
		{
			name: "internalTrafficPolicy Local without a local endpoint drops", ask: trace.Ask{From: "client-1", To: "default/itp-local"},
			service: "default/itp-local", frontend: "ClusterIP", proto: "tcp", verdict: trace.Dropped, reason: []string{"no local endpoints"},
			places: []string{"pod default/client-1 on node1", "node node1"},
		},
		{
			name: "sessionAffinity ClientIP records the client", ask: trace.Ask{From: "client-1", To: "default/sticky"},
			endpoint: "192.168.2.10:8080",
			service:  "default/sticky", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/client-1 on node1", "node node1", "node node2", "pod default/web-2 on node2"},
			in:     []string{"DNAT at node1"}, back: []string{"un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", affinity: true, cands: web},
			podSrc: "192.168.1.20",
		},
		{
			name: "no endpoints: TCP is reset", ask: trace.Ask{From: "client-1", To: "default/empty"},
			service: "default/empty", frontend: "ClusterIP", proto: "tcp", verdict: trace.Rejected, reason: []string{"tcp reset", "no endpoints"},
			places: []string{"pod default/client-1 on node1", "node node1"},
		},
		{
			name: "no endpoints: UDP gets ICMP port unreachable", ask: trace.Ask{From: "client-1", To: "default/empty:dns"},
			service: "default/empty", frontend: "ClusterIP", proto: "udp", verdict: trace.Rejected, reason: []string{"icmp port-unreachable", "no endpoints"},
			places: []string{"pod default/client-1 on node1", "node node1"},
		},
		{
			// No ready endpoint: the serving terminating one is used; the
			// terminating one that no longer serves is not a candidate.
			name: "all endpoints terminating: serving ones are the fallback", ask: trace.Ask{From: "client-1", To: "default/draining"},
			service: "default/draining", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/client-1 on node1", "node node1", "node node2", "pod default/old-2 on node2"},
			in:     []string{"DNAT at node1"}, back: []string{"un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", fallback: true, cands: []candWant{{"192.168.2.30:8080", "1", true}}},
			podSrc: "192.168.1.20",
		},
		{
			name: "topology hints: zone-b keeps to zone-b endpoints", ask: trace.Ask{From: "client-3", To: "default/topo"},
			endpoint: "192.168.3.40:8080",
			service:  "default/topo", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/client-3 on node3", "node node3", "pod default/topo-3 on node3"},
			in:     []string{"DNAT at node3"}, back: []string{"un-DNAT at node3"},
			choice: &choiceWant{node: "node3", set: "cluster", cands: []candWant{{"192.168.2.40:8080", "1/2", false}, {"192.168.3.40:8080", "1/2", false}}},
			podSrc: "192.168.3.20",
		},
		{
			name: "topology hints: zone-a keeps to its one endpoint", ask: trace.Ask{From: "client-1", To: "default/topo"},
			service: "default/topo", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/client-1 on node1", "node node1", "pod default/topo-1 on node1"},
			in:     []string{"DNAT at node1"}, back: []string{"un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: []candWant{{"192.168.1.40:8080", "1", false}}},
			podSrc: "192.168.1.20",
		},
		{
			name: "UDP", ask: trace.Ask{From: "client-2", To: "default/dns"}, endpoint: "192.168.2.10:5353",
			service: "default/dns", frontend: "ClusterIP", proto: "udp", verdict: trace.Delivered,
			places: []string{"pod default/client-2 on node2", "node node2", "pod default/web-2 on node2"},
			in:     []string{"DNAT at node2"}, back: []string{"un-DNAT at node2"},
			choice: &choiceWant{node: "node2", set: "cluster", cands: []candWant{{"192.168.1.10:5353", "1/2", false}, {"192.168.2.10:5353", "1/2", false}}},
			podSrc: "192.168.2.20",
		},
		{
			name: "SCTP", ask: trace.Ask{From: "client-3", To: "default/sig"},
			service: "default/sig", frontend: "ClusterIP", proto: "sctp", verdict: trace.Delivered,
			places: []string{"pod default/client-3 on node3", "node node3", "node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node3"}, back: []string{"un-DNAT at node3"},
			choice: &choiceWant{node: "node3", set: "cluster", cands: []candWant{{"192.168.1.10:9000", "1/2", false}, {"192.168.2.10:9000", "1/2", false}}},
			podSrc: "192.168.3.20",
		},
		{
			name: "IPv6 ClusterIP", ask: trace.Ask{From: "client-3", To: "default/web", IPv6: true},
			endpoint: "[fd00:192:168:2::10]:8080",
			service:  "default/web", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/client-3 on node3", "node node3", "node node2", "pod default/web-2 on node2"},
			in:     []string{"DNAT at node3"}, back: []string{"un-DNAT at node3"},
			choice: &choiceWant{node: "node3", set: "cluster", cands: []candWant{{"[fd00:192:168:1::10]:8080", "1/2", false}, {"[fd00:192:168:2::10]:8080", "1/2", false}}},
			podSrc: "fd00:192:168:3::20",
		},
		{
			// Hairpin: the endpoint reaches itself through its Service;
			// it is masqueraded to node1's bridge address, or its reply
			// would skip conntrack's reverse DNAT.
			name: "hairpin: a pod to its own Service", ask: trace.Ask{From: "web-1", To: "default/web"}, endpoint: "192.168.1.10:8080",
			service: "default/web", frontend: "ClusterIP", proto: "tcp", verdict: trace.Delivered,
			places: []string{"pod default/web-1 on node1", "node node1", "pod default/web-1 on node1"},
			in:     []string{"DNAT at node1", "SNAT at node1"}, back: []string{"un-SNAT at node1", "un-DNAT at node1"},
			choice: &choiceWant{node: "node1", set: "cluster", cands: web},
			podSrc: "192.168.1.1",
		},
		{
			// service.kubernetes.io/service-proxy-name names another
			// proxy: svcnet does not translate the ClusterIP, the packet
			// leaves node1 by its default route, untouched, and the tracer
			// cannot follow it beyond.
			name: "opt-out Service (another proxy's) is not translated", ask: trace.Ask{From: "client-1", To: "10.96.0.99:80"},
			proto: "tcp", verdict: trace.Delivered, reason: []string{"out of the cluster"}, leaves: true,
			places: []string{"pod default/client-1 on node1", "node node1", "10.96.0.99"},
		},
		{
			// Egress masquerade: a pod's connection to a host outside the
			// cluster leaves with its node's address, so the host's reply
			// comes back to the node, which translates it back.
			name: "a pod to a host outside the cluster is masqueraded (egress)", ask: trace.Ask{From: "client-1", To: "client:9090"},
			proto: "tcp", verdict: trace.Delivered, reason: []string{"to the external host"},
			places: []string{"pod default/client-1 on node1", "node node1", "client"},
			in:     []string{"SNAT at node1"}, back: []string{"un-SNAT at node1"},
		},
		{
			name: "a pod to the internet: egress masquerade, then the gateway", ask: trace.Ask{From: "client-2", To: "203.0.113.50:443"},
			proto: "tcp", verdict: trace.Delivered, reason: []string{"out of the cluster"}, leaves: true,
			places: []string{"pod default/client-2 on node2", "node node2", "203.0.113.50"},
			in:     []string{"SNAT at node2"},
		},
		{
			name: "IPv6: a pod to a host outside the cluster is masqueraded (egress)", ask: trace.Ask{From: "client-3", To: "[fd00:26:236::10]:9090", IPv6: true},
			proto: "tcp", verdict: trace.Delivered, reason: []string{"to the external host"},
			places: []string{"pod default/client-3 on node3", "node node3", "fd00:26:236::10"},
			in:     []string{"SNAT at node3"}, back: []string{"un-SNAT at node3"},
		},
		{
			// Without egress masquerade the host sees the pod's address,
			// which nothing on the node network routes back.
			name: "egress masquerade off: the outside host's reply is lost", ask: trace.Ask{From: "client-1", To: "client:9090"},
			proto: "tcp", verdict: trace.Unreachable, reason: []string{"the reply is lost", "192.168.1.20 is a pod address: the node network has no route to the pod CIDRs"},
			places: []string{"pod default/client-1 on node1", "node node1", "client"},
			opts:   func(o *trace.Options) { o.EgressOff = true },
		},
		{
			name: "a non-masquerade CIDR: the outside host sees the pod", ask: trace.Ask{From: "client-1", To: "client:9090"},
			proto: "tcp", verdict: trace.Unreachable, reason: []string{"the reply is lost"},
			places: []string{"pod default/client-1 on node1", "node node1", "client"},
			opts: func(o *trace.Options) {
				o.Egress.NonMasqueradeCIDRs = []netip.Prefix{netip.MustParsePrefix("172.26.236.0/24")}
			},
		},
	}
}

// runScenario traces one row over rendered rules.
func runScenario(t *testing.T, snap *model.Snapshot, sc scenario) *trace.Trace {
	t.Helper()
	// svcnet proxy's settings in the lab: pods in the cluster CIDRs, the
	// Service CIDRs its control plane allocates from (loadScenario's).
	opts := trace.Options{Rules: trace.RulesRendered, ClusterCIDRs: []netip.Prefix{
		netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00:192:168::/48")}}
	opts.Egress.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")}
	if sc.opts != nil {
		sc.opts(&opts)
	}
	if sc.endpoint != "" {
		opts.Endpoint = netip.MustParseAddrPort(sc.endpoint)
	}
	ask := sc.ask
	ask.Rand = func(n int) int {
		if n != 60999-32768+1 {
			t.Errorf("ephemeral port drawn from %d ports, want the 28232 of ip_local_port_range 32768-60999", n)
		}
		return ephemeralPick
	}
	tr, err := trace.Run(context.Background(), snap, scenarioNetwork(snap), ask, opts)
	if err != nil {
		t.Fatalf("trace %s → %s: %v", sc.ask.From, sc.ask.To, err)
	}
	return tr
}

func TestScenarios(t *testing.T) {
	snap := loadScenario(t)
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			tr := runScenario(t, snap, sc)
			checkScenario(t, sc, tr)
			if t.Failed() {
				var b bytes.Buffer
				if err := trace.WriteText(&b, tr); err == nil {
					t.Logf("the trace:\n%s", b.String())
				}
			}
		})
	}
}

func checkScenario(t *testing.T, sc scenario, tr *trace.Trace) {
	t.Helper()
	req := tr.Request
	if req.Service != sc.service || req.Frontend != sc.frontend {
		t.Errorf("request Service %q frontend %q, want %q %q", req.Service, req.Frontend, sc.service, sc.frontend)
	}
	if req.Packet.Proto != sc.proto {
		t.Errorf("protocol %q, want %q", req.Packet.Proto, sc.proto)
	}
	if req.Rules == "" {
		t.Errorf("request does not say where the rules come from")
	}
	checkSourcePort(t, sc, req)

	if tr.Verdict.Kind != sc.verdict {
		t.Errorf("verdict %s (%s), want %s", tr.Verdict.Kind, tr.Verdict.Reason, sc.verdict)
	}
	for _, phrase := range sc.reason {
		if !strings.Contains(tr.Verdict.Reason, phrase) {
			t.Errorf("verdict reason %q does not say %q", tr.Verdict.Reason, phrase)
		}
	}
	if diff := cmp.Diff(sc.places, places(tr.Hops)); diff != "" {
		t.Errorf("hop places (-want +got):\n%s", diff)
	}
	if n := len(tr.Hops); n > 0 && tr.Verdict.Place != tr.Hops[n-1].Place.String() {
		t.Errorf("verdict place %q, want the last hop's %q", tr.Verdict.Place, tr.Hops[n-1].Place)
	}
	if diff := cmp.Diff(sc.in, rewrites(tr.Hops)); diff != "" {
		t.Errorf("rewrites on the way in (-want +got):\n%s", diff)
	}
	if !sc.leaves {
		if diff := cmp.Diff(sc.back, rewrites(tr.Reply)); diff != "" {
			t.Errorf("rewrites of the reply (-want +got):\n%s", diff)
		}
		if tr.Summary.ReplyRewrites != len(sc.back) {
			t.Errorf("summary counts %d reply rewrites, want %d", tr.Summary.ReplyRewrites, len(sc.back))
		}
	}
	if tr.Summary.Rewrites != len(sc.in) {
		t.Errorf("summary counts %d rewrites on the way in, want %d", tr.Summary.Rewrites, len(sc.in))
	}
	nodes := 0
	for _, p := range sc.places {
		if strings.HasPrefix(p, "node ") {
			nodes++
		}
	}
	if tr.Summary.NodeHops != nodes {
		t.Errorf("summary counts %d node hops, want %d", tr.Summary.NodeHops, nodes)
	}
	checkRewriteChains(t, tr)
	checkChoice(t, sc, tr)
	checkPodSource(t, sc, tr)
	if sc.verdict == trace.Delivered && !sc.leaves {
		checkReplyReturns(t, tr)
	}
}

// checkSourcePort: a source port given in From is kept; else the tracer picks
// an ephemeral one (through Ask.Rand) and says so.
func checkSourcePort(t *testing.T, sc scenario, req trace.Request) {
	t.Helper()
	given := uint16(0)
	if i := strings.LastIndexByte(sc.ask.From, ':'); i >= 0 && strings.Count(sc.ask.From, ":") == 1 {
		_, _ = fmt.Sscan(sc.ask.From[i+1:], &given)
	}
	switch {
	case given != 0 && (req.EphemeralPort || req.Packet.Src.Port() != given):
		t.Errorf("source port %d (ephemeral %v), want the given %d", req.Packet.Src.Port(), req.EphemeralPort, given)
	case given == 0 && (!req.EphemeralPort || req.Packet.Src.Port() != ephemeralPort):
		t.Errorf("source port %d (ephemeral %v), want the picked ephemeral %d", req.Packet.Src.Port(), req.EphemeralPort, ephemeralPort)
	}
}

// checkRewriteChains: at every hop, the rewrites chain from the packet as it
// arrives to the packet as it leaves.
func checkRewriteChains(t *testing.T, tr *trace.Trace) {
	t.Helper()
	for _, hops := range [][]trace.Hop{tr.Hops, tr.Reply} {
		for _, h := range hops {
			cur := addrs(h.Arrive)
			for _, rw := range h.Rewrites {
				if addrs(rw.Before) != cur {
					t.Errorf("at %s: %s rewrite starts from %s, but the packet is %s", h.Place, rw.Kind, rw.Before, cur)
				}
				if addrs(rw.After) == addrs(rw.Before) {
					t.Errorf("at %s: %s rewrite changes nothing: %s", h.Place, rw.Kind, rw.Before)
				}
				cur = addrs(rw.After)
			}
			if h.Leave != nil && addrs(*h.Leave) != cur {
				t.Errorf("at %s: leaves as %s, but the rewrites end at %s", h.Place, *h.Leave, cur)
			}
		}
	}
}

func checkChoice(t *testing.T, sc scenario, tr *trace.Trace) {
	t.Helper()
	c := tr.Choice
	if sc.choice == nil {
		if c != nil {
			t.Errorf("endpoint choice %+v, want none", *c)
		}
		return
	}
	if c == nil {
		t.Errorf("no endpoint choice, want one on %s", sc.choice.node)
		return
	}
	w := sc.choice
	if c.Node != w.node {
		t.Errorf("choice made on %s, want %s", c.Node, w.node)
	}
	// A port of the Service: "ns/name:port/proto" as the nftables plane
	// names it, or kube-proxy's ServicePortName ("ns/name:port-name", just
	// "ns/name" for an unnamed port) as the iptables plane's comments do.
	if c.Service != sc.service && !strings.HasPrefix(c.Service, sc.service+":") {
		t.Errorf("choice of Service %q, want a port of %s", c.Service, sc.service)
	}
	if !strings.HasPrefix(c.Set, w.set) {
		t.Errorf("choice among %q endpoints, want %q", c.Set, w.set)
	}
	if fb := strings.Contains(c.Set, "terminating"); fb != w.fallback {
		t.Errorf("choice set %q: serving-terminating fallback %v, want %v", c.Set, fb, w.fallback)
	}
	if aff := strings.Contains(c.Affinity, "ClientIP"); aff != w.affinity {
		t.Errorf("choice affinity %q, want recorded: %v", c.Affinity, w.affinity)
	}
	if c.Socket != w.socket {
		t.Errorf("choice by the socket load balancer: %v, want %v", c.Socket, w.socket)
	}
	var got []candWant
	chosen := ""
	for _, cand := range c.Candidates {
		got = append(got, candWant{cand.Endpoint, cand.Probability, cand.Terminating})
		if cand.Chosen {
			if chosen != "" {
				t.Errorf("two candidates chosen: %s and %s", chosen, cand.Endpoint)
			}
			chosen = cand.Endpoint
		}
	}
	if diff := cmp.Diff(w.cands, got, cmp.AllowUnexported(candWant{})); diff != "" {
		t.Errorf("candidates (-want +got):\n%s", diff)
	}
	want := sc.endpoint
	if want == "" && len(w.cands) > 0 {
		want = w.cands[0].endpoint
	}
	if chosen != want {
		t.Errorf("chosen candidate %q, want %q", chosen, want)
	}
	// The packet goes where the chosen candidate says.
	if last := tr.Hops[len(tr.Hops)-1]; tr.Verdict.Kind == trace.Delivered && last.Place.Kind == trace.PlacePod && last.Arrive.Dst.String() != chosen {
		t.Errorf("delivered to %s, but the chosen candidate is %s", last.Arrive.Dst, chosen)
	}
}

// checkPodSource: the source address the receiving pod sees.
func checkPodSource(t *testing.T, sc scenario, tr *trace.Trace) {
	t.Helper()
	last := tr.Hops[len(tr.Hops)-1]
	if sc.podSrc == "" {
		if last.Place.Kind == trace.PlacePod && tr.Verdict.Kind == trace.Delivered && len(tr.Hops) > 1 {
			t.Errorf("delivered to pod %s, want no pod reached", last.Place)
		}
		return
	}
	if last.Place.Kind != trace.PlacePod {
		t.Errorf("last hop %s is not a pod", last.Place)
		return
	}
	if got := last.Arrive.Src.Addr().String(); got != sc.podSrc {
		t.Errorf("the pod sees source %s, want %s", got, sc.podSrc)
	}
	preserved := last.Arrive.Src.Addr() == tr.Request.Packet.Src.Addr()
	if wantPreserved := sc.podSrc == tr.Request.Packet.Src.Addr().String(); preserved != wantPreserved {
		t.Errorf("client address preserved %v, want %v", preserved, wantPreserved)
	}
}

// checkReplyReturns: the reply ends at the sender, from the address it sent
// to (the backend, when the socket load balancer translated the connect).
func checkReplyReturns(t *testing.T, tr *trace.Trace) {
	t.Helper()
	if len(tr.Reply) == 0 {
		t.Errorf("delivered, but no reply traced")
		return
	}
	first, last := tr.Hops[0], tr.Reply[len(tr.Reply)-1]
	if last.Place.String() != first.Place.String() {
		t.Errorf("the reply ends at %s, want the sender %s", last.Place, first.Place)
	}
	// The reply as the sender's socket takes it: after the last hop's
	// rewrites (a node's own socket is behind its netfilter).
	got := last.Arrive
	if n := len(last.Rewrites); n > 0 {
		got = last.Rewrites[n-1].After
	}
	p := tr.Request.Packet
	if tr.Socket.Translated() {
		p = *tr.Socket.Sent
	}
	if got.Src != p.Dst || got.Dst != p.Src {
		t.Errorf("the reply reaches the sender as %s, want %s → %s", got, p.Dst, p.Src)
	}
}

func places(hops []trace.Hop) []string {
	var out []string
	for _, h := range hops {
		out = append(out, h.Place.String())
	}
	return out
}

func rewrites(hops []trace.Hop) []string {
	var out []string
	for _, h := range hops {
		for _, rw := range h.Rewrites {
			out = append(out, fmt.Sprintf("%s at %s", rw.Kind, h.Place.Name))
		}
	}
	return out
}

// addrs is a tuple without its mark (the mark is not an address rewrite).
func addrs(t trace.Tuple) trace.Tuple { t.Mark = 0; return t }

func scenarioByName(t *testing.T, name string) scenario {
	t.Helper()
	i := slices.IndexFunc(scenarios(), func(s scenario) bool { return s.name == name })
	if i < 0 {
		t.Fatalf("no scenario %q", name)
	}
	return scenarios()[i]
}

// TestScenarioText: the text of a NodePort trace names every place, shows
// every rewrite's before and after tuples, the endpoint choice, the verdict
// and the summary.
func TestScenarioText(t *testing.T) {
	snap := loadScenario(t)
	tr := runScenario(t, snap, scenarioByName(t, "NodePort (Cluster) on a node without an endpoint"))
	var b bytes.Buffer
	if err := trace.WriteText(&b, tr); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	text := b.String()
	want := []string{
		"trace " + tr.Request.Packet.String(),
		"Service default/np, NodePort",
		"source port 33768 is ephemeral",
		"verdict: delivered at pod default/web-1 on node1",
		"summary: 2 rewrites on the way in (DNAT at node3, SNAT at node3), 2 reversed by conntrack on the way back; 2 node hops",
		"endpoint  default/np:80/tcp, cluster endpoints",
	}
	for _, h := range append(slices.Clone(tr.Hops), tr.Reply...) {
		want = append(want, ". "+h.Place.String())
		for _, rw := range h.Rewrites {
			want = append(want, fmt.Sprintf("%s  ⇒  %s", rw.Before, rw.After), string(rw.Kind))
		}
		if h.Route != nil {
			want = append(want, h.Route.Text)
		}
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("text lacks %q", w)
		}
	}

	// Under --verify the sender's kernel picked the port, and the text says so.
	tr.Request.EphemeralNetNS = "lab.pod.default.client"
	b.Reset()
	if err := trace.WriteText(&b, tr); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	if w := "source port 33768 is ephemeral: picked by the kernel of netns lab.pod.default.client"; !strings.Contains(b.String(), w) {
		t.Errorf("verified text lacks %q:\n%s", w, b.String())
	}
	// Each candidate on a line of its own: probability, endpoint, pod.
	for _, c := range tr.Choice.Candidates {
		if !slices.ContainsFunc(strings.Split(text, "\n"), func(line string) bool {
			return strings.Contains(line, " "+c.Probability+" ") && strings.Contains(line, c.Endpoint) &&
				strings.Contains(line, "pod "+c.Pod+" on "+c.Node)
		}) {
			t.Errorf("text lacks the candidate line of %s (%s, pod %s on %s)", c.Endpoint, c.Probability, c.Pod, c.Node)
		}
	}
	if len(tr.Hops)+len(tr.Reply) != 8 {
		t.Errorf("%d hops and %d reply hops, want 4 and 4", len(tr.Hops), len(tr.Reply))
	}
	if t.Failed() {
		t.Logf("the text:\n%s", text)
	}
}

// addrComparers compare netip values by value (they have unexported fields).
var addrComparers = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
}

// TestScenarioJSON: every scenario's trace survives a JSON round trip.
func TestScenarioJSON(t *testing.T) {
	snap := loadScenario(t)
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			tr := runScenario(t, snap, sc)
			data, err := json.Marshal(tr)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			var back trace.Trace
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if diff := cmp.Diff(tr, &back, addrComparers...); diff != "" {
				t.Errorf("round trip (-before +after):\n%s", diff)
			}
		})
	}
}

// TestEgressMasqueradeText: a pod's packet to a host outside the cluster
// shows the egress masquerade hop: the chain and rule that masqueraded it,
// the rewrite to the node's address with what it is, not a mark; and the
// reply's reverse translation back to the pod.
func TestEgressMasqueradeText(t *testing.T) {
	snap := loadScenario(t)
	tr := runScenario(t, snap, scenarioByName(t, "a pod to a host outside the cluster is masqueraded (egress)"))
	var b bytes.Buffer
	if err := trace.WriteText(&b, tr); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	text := b.String()
	for _, w := range []string{
		"postrouting     nat-postrouting #1  jump egress-masquerading",
		"egress-masquerading #3  masquerade: saddr 192.168.1.20:33768 → 172.26.236.177:33768",
		`rule: ip saddr 192.168.0.0/16 masquerade fully-random comment "a pod's traffic leaving the cluster: masqueraded to the node's address"`,
		"SNAT      tcp 192.168.1.20:33768 → 172.26.236.10:9090  ⇒  tcp 172.26.236.177:33768 → 172.26.236.10:9090",
		"at postrouting by svcnet egress-masquerading rule 3 (egress masquerade: a pod's traffic leaving the cluster leaves with the node's address)",
		"un-SNAT   tcp 172.26.236.10:9090 → 172.26.236.177:33768  ⇒  tcp 172.26.236.10:9090 → 192.168.1.20:33768",
		"verdict: delivered at client: to the external host",
		"summary: 1 rewrite on the way in (SNAT at node1), 1 reversed by conntrack on the way back; 1 node hop",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("text lacks %q", w)
		}
	}
	if strings.Contains(text, "asked for by mark") {
		t.Errorf("the egress masquerade is said to be asked for by a mark")
	}
	if t.Failed() {
		t.Logf("the text:\n%s", text)
	}
}
