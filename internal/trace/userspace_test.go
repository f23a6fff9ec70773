package trace

import (
	"math/big"
	"net/netip"
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

// TestUserspaceNoEndpointChoice: the redirect to a proxy port is not an
// endpoint choice (the proxy chooses in user space), so a userspace trace
// names none where the same rewrite on a kernel plane is one.
func TestUserspaceNoEndpointChoice(t *testing.T) {
	outs := []sim.Outcome{{Probability: big.NewRat(1, 1), Result: sim.Result{Verdict: sim.Accepted, Trace: []sim.Step{{
		Table: userspace.TableName, Chain: "portals-container", Rule: 0, Action: sim.ActDNAT,
		Before: &sim.Packet{Dst: netip.MustParseAddrPort("10.96.0.20:80")}, After: &sim.Packet{Dst: netip.MustParseAddrPort("192.168.1.1:40001")},
	}}}}}
	nd := &NodeNet{Name: "node1"}
	for _, tc := range []struct {
		plane  string
		choice bool
	}{{userspace.Name, false}, {DefaultPlane, true}} {
		p, err := PlaneNamed(tc.plane)
		if err != nil {
			t.Fatal(err)
		}
		w := &walk{e: &Engine{Plane: p, Net: &Network{}}}
		if c := w.describeChoice(nd, outs, 0); (c != nil) != tc.choice {
			t.Errorf("%s: choice %+v, want one: %v", tc.plane, c, tc.choice)
		}
	}
}
