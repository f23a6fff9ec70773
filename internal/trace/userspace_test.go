package trace

import (
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/dataplane/userspace"
	"github.com/svcnet/svcnet/internal/nft/sim"
)

// TestUserspaceFirewallFiltered: a drop in the userspace plane's
// loadBalancerSourceRanges chain is a source-range filter, as on the other
// planes; a drop elsewhere in its table stays a drop.
func TestUserspaceFirewallFiltered(t *testing.T) {
	p, err := PlaneNamed(userspace.Name)
	if err != nil {
		t.Fatal(err)
	}
	drop := func(chain, text string) sim.Result {
		return sim.Result{Verdict: sim.Dropped, Trace: []sim.Step{{Table: userspace.TableName, Chain: chain, Rule: 1, Text: text, Action: sim.ActDrop}}}
	}
	v := endVerdict(p, drop("firewall-default/web-lb-ranges:80/tcp", `drop comment "drop traffic to default/web-lb-ranges from outside loadBalancerSourceRanges"`), Place{Kind: PlaceNode, Name: "node1"})
	if v.Kind != Filtered || !strings.Contains(v.Reason, "outside loadBalancerSourceRanges") {
		t.Errorf("firewall drop: %s (%s), want filtered", v.Kind, v.Reason)
	}
	v = endVerdict(p, drop("filter-input", `ct state new meta l4proto tcp th dport 40001 drop comment "default/etp has no local endpoints"`), Place{Kind: PlaceNode, Name: "node1"})
	if v.Kind != Dropped || !strings.Contains(v.Reason, "traffic policy Local") {
		t.Errorf("drop of an empty local set: %s (%s), want dropped for traffic policy Local", v.Kind, v.Reason)
	}
}
