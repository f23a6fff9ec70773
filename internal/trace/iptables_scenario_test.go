package trace_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/trace"
)

// iptablesDifferences are the scenario rows where the iptables plane does
// what kube-proxy's iptables mode does, which differs from the nftables
// plane: it does not reject unknown ports of a ClusterIP, answers TCP to a
// Service without endpoints with ICMP port unreachable (REJECT's
// icmp-port-unreachable) rather than a reset.
var iptablesDifferences = map[string]func(sc *scenario){
	"unknown port of a ClusterIP is rejected": func(sc *scenario) {
		sc.verdict, sc.reason, sc.leaves = trace.Delivered, []string{"out of the cluster"}, true
		sc.places = []string{"pod default/client-1 on node1", "node node1", "10.96.0.10"}
	},
	"no endpoints: TCP is reset": func(sc *scenario) {
		sc.reason = []string{"icmp port-unreachable", "no endpoints", "-j REJECT --reject-with icmp-port-unreachable"}
	},
}

// iptablesScenario is sc traced over the iptables plane's rules.
func iptablesScenario(sc scenario) scenario {
	prev := sc.opts
	sc.opts = func(o *trace.Options) {
		if prev != nil {
			prev(o)
		}
		o.DataPlane = "iptables"
	}
	if edit := iptablesDifferences[sc.name]; edit != nil {
		edit(&sc)
	}
	return sc
}

// TestScenariosIPTables traces every scenario through the iptables plane's
// rules (kube-proxy's chains, translated for the simulator): the same
// places, rewrites, endpoint choices and probabilities as kube-proxy's
// iptables mode gives, the rows of iptablesDifferences as edited there.
func TestScenariosIPTables(t *testing.T) {
	snap := loadScenario(t)
	for _, sc := range scenarios() {
		sc := iptablesScenario(sc)
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

// TestScenarioTextIPTables: the trace over the iptables plane prints
// kube-proxy's own rules, the statistic cascade among them, and each
// candidate's probability as 1/n.
func TestScenarioTextIPTables(t *testing.T) {
	snap := loadScenario(t)
	tr := runScenario(t, snap, iptablesScenario(scenarioByName(t, "NodePort (Cluster) on a node without an endpoint")))
	var b bytes.Buffer
	if err := trace.WriteText(&b, tr); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, w := range []string{
		"rules: rendered from the cluster state as svcnet proxy renders them (--data-plane iptables)",
		"nat PREROUTING (type nat hook prerouting priority -100)",
		`rule: -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`rule: -A KUBE-SERVICES -d 172.26.236.179/32 -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -j KUBE-NODEPORTS`,
		`rule: -A KUBE-NODEPORTS -p tcp -m comment --comment "default/np" -m tcp --dport 30080 -j KUBE-EXT-`,
		`rule: -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000`,
		`-m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-`,
		`-j DNAT --to-destination 192.168.1.10:8080`,
		`rule: -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`,
		"endpoint  default/np, cluster endpoints",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("text lacks %q", w)
		}
	}
	for _, c := range tr.Choice.Candidates {
		if c.Probability != "1/2" {
			t.Errorf("candidate %s has probability %s, want 1/2", c.Endpoint, c.Probability)
		}
	}
	if t.Failed() {
		t.Logf("the text:\n%s", text)
	}
}

// TestScenarioVerboseIPTables: with Verbose, a translated rule that did not
// match is shown with its own text below the match that failed (nft
// syntax), so the statistic rules a packet passed over are readable.
func TestScenarioVerboseIPTables(t *testing.T) {
	snap := loadScenario(t)
	sc := iptablesScenario(scenarioByName(t, "NodePort (Cluster) on a node without an endpoint"))
	sc.endpoint = "192.168.2.10:8080"
	withPlane := sc.opts
	sc.opts = func(o *trace.Options) { withPlane(o); o.Verbose = true }
	tr := runScenario(t, snap, sc)
	var b bytes.Buffer
	if err := trace.WriteText(&b, tr); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	i := strings.Index(text, "no-match: numgen random mod 2 0: drew another of 2 values (p=1/2)")
	if i < 0 {
		t.Fatalf("no no-match step of the statistic rule:\n%s", text)
	}
	next, _, _ := strings.Cut(text[i:], "\n")
	rest := text[i+len(next)+1:]
	line, _, _ := strings.Cut(rest, "\n")
	if !strings.Contains(line, "rule: -A KUBE-SVC-") || !strings.Contains(line, "-m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-") {
		t.Errorf("the statistic rule passed over is not shown below its step; the next line is %q", line)
	}
}
