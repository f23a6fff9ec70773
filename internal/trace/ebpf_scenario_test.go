package trace_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/trace"
)

// socketTranslated edits a row whose sender is on a node (a pod, the node
// itself) and whose frontend the socket load balancer holds: the connect
// goes to the same endpoint choice, made at connect() by the socket load
// balancer, and no packet of the connection is translated, either way.
func socketTranslated(sc *scenario) {
	sc.in, sc.back = nil, nil
	sc.choice.socket = true
}

// socketRefused edits a row whose frontend has no endpoints: the socket
// load balancer refuses the connect, and no packet leaves the sender.
func socketRefused(sc *scenario) {
	sc.reason = []string{"ECONNREFUSED", "no endpoints", "no packet is sent"}
	sc.places = sc.places[:1]
}

// ebpfDifferences are the scenario rows where the ebpf plane differs from
// the nftables plane: senders on a node connecting to a frontend the socket
// load balancer holds. Every other row (senders off the nodes; frontends it
// leaves to the rules: a policy drop, source ranges, SCTP, and every UDP
// socket's connect; destinations that are no frontend) has the nftables
// plane's places and rewrites (by kind and node): for senders off the
// nodes, the entry node's tc load balancer makes the rules' translations
// itself (tcRows).
var ebpfDifferences = map[string]func(sc *scenario){
	"ClusterIP from a pod to an endpoint on its node":                     socketTranslated,
	"ClusterIP from a pod to an endpoint on another node":                 socketTranslated,
	"ClusterIP from a node (host network) to an endpoint on another node": socketTranslated,
	// The hook runs before the kernel picks the source address: towards
	// its own pod the node's socket takes its bridge address, as the
	// nftables plane's masquerade did.
	"ClusterIP from a node (host network) to an endpoint on it":         socketTranslated,
	"NodePort (Local) from a pod short-circuits to any endpoint":        socketTranslated,
	"NodePort (Local) from the node itself short-circuits, masqueraded": socketTranslated,
	"internalTrafficPolicy Local with a local endpoint":                 socketTranslated,
	"all endpoints terminating: serving ones are the fallback":          socketTranslated,
	"topology hints: zone-b keeps to zone-b endpoints":                  socketTranslated,
	"topology hints: zone-a keeps to its one endpoint":                  socketTranslated,
	"sessionAffinity ClientIP records the client":                       socketTranslated,
	"IPv6 ClusterIP":             socketTranslated,
	"no endpoints: TCP is reset": socketRefused,
	// The endpoint is the pod itself: its connect goes to its own address,
	// over loopback, and meets no node.
	"hairpin: a pod to its own Service": func(sc *scenario) {
		socketTranslated(sc)
		sc.places, sc.podSrc = sc.places[:1], "192.168.1.10"
	},
}

// ebpfScenario is sc traced over the ebpf plane.
func ebpfScenario(sc scenario) scenario {
	prev := sc.opts
	sc.opts = func(o *trace.Options) {
		if prev != nil {
			prev(o)
		}
		o.DataPlane = ebpfplane.Name
	}
	if edit := ebpfDifferences[sc.name]; edit != nil {
		edit(&sc)
	}
	return sc
}

// TestScenariosEBPF traces every scenario over the ebpf plane: the rows of
// ebpfDifferences as edited there, every other row exactly as on the
// nftables plane.
func TestScenariosEBPF(t *testing.T) {
	snap := loadScenario(t)
	names := map[string]bool{}
	for _, sc := range scenarios() {
		names[sc.name] = true
		sc := ebpfScenario(sc)
		t.Run(sc.name, func(t *testing.T) {
			tr := runScenario(t, snap, sc)
			checkScenario(t, sc, tr)
			if _, differs := ebpfDifferences[sc.name]; differs != (tr.Socket != nil && tr.Socket.Held) {
				t.Errorf("socket load balancer decision %+v; want it to hold the frontend: %v", tr.Socket, differs)
			}
			if t.Failed() {
				var b bytes.Buffer
				if err := trace.WriteText(&b, tr); err == nil {
					t.Logf("the trace:\n%s", b.String())
				}
			}
		})
	}
	for name := range ebpfDifferences {
		if !names[name] {
			t.Errorf("ebpfDifferences names no scenario: %q", name)
		}
	}
}

// TestScenarioTextEBPF: a translated connect is shown at the sender,
// before its first packet: the hook, the services map entry, the backends
// with their probabilities, the one followed, what getpeername reports and
// the packet as sent, to the backend; a refused one ends there; a frontend
// left to the rules says why, in a note.
func TestScenarioTextEBPF(t *testing.T) {
	snap := loadScenario(t)
	for _, tc := range []struct {
		row  string
		want []string
	}{{
		row: "ClusterIP from a pod to an endpoint on another node",
		want: []string{
			"rules: rendered from the cluster state as svcnet proxy renders them (--data-plane ebpf)",
			"connect   tcp 192.168.3.20:40000 → 10.96.0.10:80\n              at cgroup connect4 of node node3's cgroup: the socket load balancer, before any packet exists",
			"entry     services map 10.96.0.10:80/tcp → 2 backends (default/web:http/tcp, ClusterIP)",
			"endpoint  default/web:http/tcp, cluster endpoints; one of 2 backends, uniformly at random, per connect (unless the proxy's --ebpf-scheduler says otherwise):",
			"✓ 1/2    192.168.1.10:8080        pod default/web-1 on node1",
			"  1/2    192.168.2.10:8080        pod default/web-2 on node2",
			"backend   connected to 192.168.1.10:8080 instead",
			"getpeer   reports 10.96.0.10:80 (the reverse map)",
			"sends     tcp 192.168.3.20:40000 → 192.168.1.10:8080\n",
			"reply (nothing to translate back: the connect was translated at the socket):",
			"summary: connect() to 10.96.0.10:80 translated to 192.168.1.10:8080 by the socket load balancer (cgroup connect4 of node node3); 0 rewrites on the way in, 0 reversed by conntrack on the way back; 2 node hops",
		},
	}, {
		row: "IPv6 ClusterIP",
		want: []string{
			"at cgroup connect6 of node node3's cgroup",
			"entry     services map [fd00:96::10]:80/tcp → 2 backends",
			"✓ 1/2    [fd00:192:168:2::10]:8080",
		},
	}, {
		row: "ClusterIP from a node (host network) to an endpoint on it",
		want: []string{
			"connect   tcp 172.26.236.177:33768 → 10.96.0.10:80",
			"sends     tcp 192.168.1.1:33768 → 192.168.1.10:8080",
		},
	}, {
		row: "no endpoints: TCP is reset",
		want: []string{
			"entry     services map 10.96.0.70:80/tcp → no backends (default/empty:http/tcp, ClusterIP)",
			"end       rejected: connect() fails with ECONNREFUSED (no backends); no packet is sent",
			"verdict: rejected at pod default/client-1 on node1: the socket load balancer (cgroup connect4 of node node1) refuses the connect with ECONNREFUSED",
		},
	}, {
		row:  "UDP",
		want: []string{"leaves 10.96.0.53:53/udp to the nftables rules: a UDP socket's connect is left alone"},
	}, {
		row:  "no endpoints: UDP gets ICMP port unreachable",
		want: []string{"leaves 10.96.0.70:53/udp to the nftables rules: a UDP socket's connect is left alone"},
	}, {
		row: "sessionAffinity ClientIP records the client",
		want: []string{
			"sessionAffinity ClientIP: the socket load balancer keeps this client (its network namespace) on the backend of its last connect for 3h0m0s",
			"sends     tcp 192.168.1.20:33768 → 192.168.2.10:8080",
		},
	}} {
		t.Run(tc.row, func(t *testing.T) {
			tr := runScenario(t, snap, ebpfScenario(scenarioByName(t, tc.row)))
			var b bytes.Buffer
			if err := trace.WriteText(&b, tr); err != nil {
				t.Fatal(err)
			}
			text := b.String()
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("text lacks %q", w)
				}
			}
			if tr.Socket.Refused() && strings.Contains(text, "sends ") {
				t.Errorf("a refused connect sends a packet")
			}
			if t.Failed() {
				t.Logf("the text:\n%s", text)
			}
		})
	}
}

// TestScenarioJSONEBPF: a trace with the socket load balancer's decision
// survives a JSON round trip.
func TestScenarioJSONEBPF(t *testing.T) {
	snap := loadScenario(t)
	for name := range ebpfDifferences {
		t.Run(name, func(t *testing.T) {
			tr := runScenario(t, snap, ebpfScenario(scenarioByName(t, name)))
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
