package trace_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ebpf/tclb"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/trace"
)

// tcRow is what the tc load balancer does in a scenario row whose sender
// is off the nodes: "local" (DNAT, the node's rules on), "remote" (DNAT and
// SNAT, past the node's netfilter) or "left" (the rules decide).
type tcRow struct {
	path string
	mark uint32 // a local backend's masquerade mark (0: Local policy)
	left string // a phrase of why the rules decide
}

// tcRows are the scenario rows where the entry node's tc load balancer
// decides; every other row with a sender off the nodes goes to no frontend
// of it (a ClusterIP, an LB IP of ipMode Proxy). Their endpoint choice and
// rewrites by kind and node are those of the nftables plane's rules
// (scenarios), made by the programs instead.
var tcRows = map[string]tcRow{
	"NodePort (Cluster) on a node with an endpoint":                      {path: "local", mark: 0x4000},
	"NodePort (Cluster) on a node without an endpoint":                   {path: "remote"},
	"NodePort (Local) on the node with the endpoint keeps the client IP": {path: "local"},
	"NodePort (Local) on a node without a local endpoint drops":          {path: "left", left: "no endpoint for traffic from outside"},
	"LoadBalancer IP from inside loadBalancerSourceRanges":               {path: "left", left: "loadBalancerSourceRanges"},
	"LoadBalancer IP from outside loadBalancerSourceRanges is filtered":  {path: "left", left: "loadBalancerSourceRanges"},
	"the LoadBalancer's NodePort is not filtered by source ranges":       {path: "local", mark: 0x4000},
	"externalIP": {path: "remote"},
}

// TestScenariosTC: a sender off the nodes meets the entry node's tc load
// balancer for the rows of tcRows, as listed there; a remote backend's
// packet passes the entry node with no netfilter step either way, a local
// one's meets the rules already addressed to the pod (no Service rule
// matches: no rule's DNAT) and leaves by tc egress translated back.
func TestScenariosTC(t *testing.T) {
	snap := loadScenario(t)
	names := map[string]bool{}
	for _, sc := range scenarios() {
		names[sc.name] = true
		row, held := tcRows[sc.name]
		t.Run(sc.name, func(t *testing.T) {
			tr := runScenario(t, snap, ebpfScenario(sc))
			x := tr.TC
			switch {
			case !held && x != nil:
				t.Fatalf("tc load balancer decision %+v; want none", x)
			case !held:
				return
			case x == nil:
				t.Fatalf("no tc load balancer decision; want %s", row.path)
			}
			if x.Hook != "tc ingress eth0" || x.Node != tr.Hops[1].Place.Name {
				t.Errorf("decided at %s of %s; want tc ingress eth0 of the entry node %s", x.Hook, x.Node, tr.Hops[1].Place.Name)
			}
			got := "left"
			if x.Remote() {
				got = "remote"
			} else if x.Translated() {
				got = "local"
			}
			if got != row.path || x.Mark != row.mark {
				t.Errorf("path %s mark 0x%x; want %s 0x%x", got, x.Mark, row.path, row.mark)
			}
			if row.path == "left" {
				if !strings.Contains(x.Left, row.left) || !strings.Contains(strings.Join(tr.Request.Notes, "\n"), row.left) {
					t.Errorf("left %q, notes %q; want them to say %q", x.Left, tr.Request.Notes, row.left)
				}
				return
			}
			if tr.Choice == nil || !tr.Choice.TC || tr.Choice.Node != x.Node {
				t.Errorf("choice %+v; want the tc load balancer's on %s", tr.Choice, x.Node)
			}
			entry := tr.Hops[1]
			if entry.TC == nil || entry.Rewrites[0].After.Dst != x.Backend {
				t.Fatalf("entry hop %+v: want the tc step's DNAT to %s first", entry, x.Backend)
			}
			var back *trace.Hop
			for i := range tr.Reply {
				if h := &tr.Reply[i]; h.Place.Name == x.Node && h.TC != nil {
					back = h
				}
			}
			if back == nil || back.Leave == nil || back.Leave.Src != x.Frontend || back.Leave.Dst != x.Client {
				t.Fatalf("reply: no hop at %s where the tc load balancer translates it back to %s → %s", x.Node, x.Frontend, x.Client)
			}
			if row.path == "remote" {
				if len(entry.Steps) != 0 || len(back.Steps) != 0 || !entry.TC.PastNetfilter || !back.TC.PastNetfilter {
					t.Errorf("a remote backend's packets meet node %s's netfilter: %d steps in, %d back", x.Node, len(entry.Steps), len(back.Steps))
				}
				if x.SNAT.Port() != 61000 || entry.Leave.Src != x.SNAT || back.TC.Hook != "tc ingress eth0" {
					t.Errorf("SNAT %s, leaves %s, answer at %s; want the node's address and port 61000 (the lowest), back at tc ingress", x.SNAT, entry.Leave, back.TC.Hook)
				}
				return
			}
			if len(entry.Steps) == 0 || entry.TC.PastNetfilter || back.TC.Hook != "tc egress eth0" {
				t.Errorf("a local backend's packet skips node %s's rules, or is translated back at %s; want its rules, then tc egress", x.Node, back.TC.Hook)
			}
			for _, rw := range entry.Rewrites[1:] {
				if rw.Kind == trace.RewriteDNAT {
					t.Errorf("a rule DNATs the packet the tc load balancer already sent to %s: %+v", x.Backend, rw)
				}
			}
			if entry.TC.After.Mark != row.mark {
				t.Errorf("tc ingress leaves mark 0x%x; want 0x%x", entry.TC.After.Mark, row.mark)
			}
			if t.Failed() {
				var b bytes.Buffer
				if err := trace.WriteText(&b, tr); err == nil {
					t.Logf("the trace:\n%s", b.String())
				}
			}
		})
	}
	for name := range tcRows {
		if !names[name] {
			t.Errorf("tcRows names no scenario: %q", name)
		}
	}
}

// TestScenarioTextTC: the tc step is shown at the entry node, before its
// netfilter steps: the hook, the services map entry, the backends with
// their probabilities and the one followed, and the rewrite; the answer's
// translation back where it happens.
func TestScenarioTextTC(t *testing.T) {
	snap := loadScenario(t)
	for _, tc := range []struct {
		row  string
		want []string
	}{{
		row: "NodePort (Cluster) on a node without an endpoint",
		want: []string{
			"tc        at tc ingress eth0: the tc load balancer (svcnet proxy --ebpf-external), before netfilter\n" +
				"    entry     services map 172.26.236.179:30080/tcp → 2 backends (default/np:80/tcp, NodePort, externalTrafficPolicy Cluster)\n" +
				"    endpoint  default/np:80/tcp, cluster endpoints; one of 2 backends, uniformly at random, per new connection (the tc load balancer):\n" +
				"              ✓ 1/2    192.168.1.10:8080        pod default/web-1 on node1\n" +
				"                1/2    192.168.2.10:8080        pod default/web-2 on node2\n" +
				"    dnat+snat a backend on another node: destination rewritten to 192.168.1.10:8080 and source to 172.26.236.179:61000 (the node's address; the port is the program's random choice of 1024–32767 or 61000–65535), TTL lowered; forwarded by FIB lookup and bpf_redirect, past this node's netfilter\n",
			"SNAT      tcp 172.26.236.10:33768 → 192.168.1.10:8080  ⇒  tcp 172.26.236.179:61000 → 192.168.1.10:8080\n              at tc ingress eth0 by the tc load balancer (tclb conns)",
			"reply (the tc load balancer translates it back):",
			"revnat    an answer to the SNAT address 172.26.236.179:61000 (revnat): rewritten back to 172.26.236.179:30080 → 172.26.236.10:33768, forwarded by FIB lookup and bpf_redirect, past this node's netfilter",
			"summary: sent to 192.168.1.10:8080 by the tc load balancer (tc ingress eth0 of node node3), past its netfilter both ways; 2 rewrites on the way in (DNAT at node3, SNAT at node3), 2 reversed by the tc load balancer on the way back; 2 node hops",
		},
	}, {
		row: "NodePort (Cluster) on a node with an endpoint",
		want: []string{
			"dnat      a backend on this node: destination rewritten to 192.168.2.10:8080; the packet goes on through node node2's stack; externalTrafficPolicy Cluster: skb mark |= 0x4000, so it is masqueraded in postrouting",
			"DNAT      tcp 172.26.236.10:33768 → 172.26.236.178:30080  ⇒  tcp 172.26.236.10:33768 → 192.168.2.10:8080 (mark 0x4000)",
			"masquerading #2  masquerade: saddr 172.26.236.10:33768 → 192.168.2.1:33768",
			"reply (conntrack and the tc load balancer translate it back):",
			"tc        at tc egress eth0: the tc load balancer (svcnet proxy --ebpf-external), after netfilter\n    revnat    an answer from the local backend (revnat): source rewritten back to the frontend 172.26.236.178:30080",
			"2 reversed by conntrack and the tc load balancer on the way back",
		},
	}, {
		row: "NodePort (Local) on the node with the endpoint keeps the client IP",
		want: []string{
			"(default/np-local:80/tcp, NodePort, externalTrafficPolicy Local)",
			"1 reversed by the tc load balancer on the way back",
			"local endpoints; one of 1 backend",
			"externalTrafficPolicy Local: no mark, the client's address is kept",
		},
	}, {
		row: "NodePort (Local) on a node without a local endpoint drops",
		want: []string{
			"note: the tc load balancer (tc ingress eth0 of node node1) leaves 172.26.236.177:30081/tcp to the nftables rules: no endpoint for traffic from outside under the external traffic policy",
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
			if t.Failed() {
				t.Logf("the text:\n%s", text)
			}
		})
	}
}

// TestScenarioJSONTC: a trace with the tc load balancer's decision and
// steps survives a JSON round trip.
func TestScenarioJSONTC(t *testing.T) {
	snap := loadScenario(t)
	for name := range tcRows {
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
			if back.TC == nil || !strings.Contains(string(data), `"tc":{"hook":"tc ingress eth0"`) {
				t.Errorf("the JSON lacks the tc load balancer's decision: %s", data)
			}
		})
	}
}

// TestTCFromAnotherNode: a connection from a pod to another node's
// NodePort is no frontend of its own node's load balancers, so it reaches
// the other node's uplink, whose tc load balancer takes it like any from
// outside: from the pod's node's address, egress-masqueraded, or left to
// the rules from the pod network itself (egress masquerade off) to a Local
// frontend, which send it to any endpoint.
func TestTCFromAnotherNode(t *testing.T) {
	snap := loadScenario(t)
	for _, tc := range []struct {
		name      string
		to        string
		egressOff bool
		held      bool
		left      string
	}{
		{name: "Cluster, masqueraded by the pod's node", to: "node2:30080", held: true},
		{name: "Local, masqueraded by the pod's node", to: "node2:30081", held: true},
		{name: "Local, from the pod network", to: "node2:30081", egressOff: true, left: "from the cluster's pod network to an externalTrafficPolicy Local frontend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := scenario{name: tc.name, ask: trace.Ask{From: "client-1", To: tc.to}}
			if tc.egressOff {
				sc.opts = func(o *trace.Options) { o.EgressOff = true }
			}
			tr := runScenario(t, snap, ebpfScenario(sc))
			x := tr.TC
			if x == nil || x.Node != "node2" || x.Held != tc.held || !strings.Contains(x.Left, tc.left) {
				t.Fatalf("tc load balancer decision %+v; want node2's, held %v, left %q", x, tc.held, tc.left)
			}
			if tc.held && (tr.Hops[2].TC == nil || tr.Hops[2].Place.Name != "node2") {
				t.Errorf("hop 3 %s has no tc step", tr.Hops[2].Place)
			}
			if tr.Verdict.Kind != trace.Delivered {
				t.Errorf("verdict %s (%s); want delivered", tr.Verdict.Kind, tr.Verdict.Reason)
			}
		})
	}
}

// TestScenarioMaglevTC: under Maglev (the Service's svcnet.io/scheduler)
// the tc step names the slot the flow hashes to and follows the backend
// the program's own hash gives (tclb.MaglevTable), each candidate with its
// share of the slots; a requested endpoint the flow cannot reach is
// followed by a note, not by the trace.
func TestScenarioMaglevTC(t *testing.T) {
	const row = "NodePort (Cluster) on a node without an endpoint"
	for _, endpoint := range []string{"", "192.168.1.10:8080", "192.168.2.10:8080"} {
		t.Run("endpoint="+endpoint, func(t *testing.T) {
			snap := loadScenario(t)
			st := snap.Service(model.ServiceKey{Namespace: "default", Name: "np"})
			if st == nil {
				t.Fatal("no Service default/np in the scenario")
			}
			st.Service.Annotations = map[string]string{model.SchedulerAnnotation: "maglev"}
			sc := ebpfScenario(scenarioByName(t, row))
			sc.endpoint = endpoint
			tr := runScenario(t, snap, sc)
			x := tr.TC
			if x == nil || !x.Maglev || tr.Choice == nil || !tr.Choice.Hashed {
				t.Fatalf("tc decision %+v, choice %+v; want Maglev, hashed", x, tr.Choice)
			}
			table, err := tclb.NewMaglevTable(x.Backends)
			if err != nil {
				t.Fatal(err)
			}
			pick, slot, err := table.Pick(x.Client, x.Frontend, model.ProtocolTCP)
			if err != nil {
				t.Fatal(err)
			}
			if x.Backend != x.Backends[pick] || x.MaglevSlot != slot {
				t.Errorf("followed %s at slot %d; the program's hash gives %s at slot %d", x.Backend, x.MaglevSlot, x.Backends[pick], slot)
			}
			var sum float64
			for i, c := range tr.Choice.Candidates {
				sum += c.P
				if c.Chosen != (i == pick) {
					t.Errorf("candidate %s chosen=%v; want only %s", c.Endpoint, c.Chosen, x.Backends[pick])
				}
			}
			if sum < 0.999999 || sum > 1.000001 {
				t.Errorf("candidates' probabilities add up to %v", sum)
			}
			var b bytes.Buffer
			if err := trace.WriteText(&b, tr); err != nil {
				t.Fatal(err)
			}
			text := b.String()
			want := fmt.Sprintf("by Maglev consistent hashing (the tc load balancer): the flow's addresses, ports and protocol hash to slot %d of the frontend's 65537-slot table, which holds %s", slot, x.Backends[pick])
			if !strings.Contains(text, want) {
				t.Errorf("text lacks %q:\n%s", want, text)
			}
			noted := strings.Contains(strings.Join(tr.Request.Notes, "\n"), "is not where this flow goes")
			if unreachable := endpoint != "" && endpoint != x.Backends[pick].String(); noted != unreachable {
				t.Errorf("notes %q; want a note of the unreachable endpoint: %v", tr.Request.Notes, unreachable)
			}
		})
	}
}
