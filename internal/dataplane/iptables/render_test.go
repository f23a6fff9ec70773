package iptables

import (
	"testing"

	"github.com/svcnet/svcnet/internal/goldentest"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// TestRenderFeatureGolden pins the full restore input of each feature row,
// one Service per file, IPv4 (and IPv6 for the dual-stack row).
func TestRenderFeatureGolden(t *testing.T) {
	for _, f := range features() {
		t.Run(f.name, func(t *testing.T) {
			tbl := build(t, testNode(), f.svcs, f.slices...)
			goldentest.Check(t, f.name+"-ip.golden", Render(tbl, ipfamily.IPv4).Full())
			if f.name == "dual-stack" {
				goldentest.Check(t, f.name+"-ip6.golden", Render(tbl, ipfamily.IPv6).Full())
			}
		})
	}
}

// detectModes are kube-proxy's --detect-local-mode values as the node
// config carries them, no detection, --masquerade-all, a non-default mark
// and egress masquerade: the node settings the shared rules depend on.
var detectModes = []struct {
	name string
	edit func(n *servicetable.NodeConfig)
}{
	{"bridge", func(n *servicetable.NodeConfig) { n.ClusterCIDRs, n.PodInterface = nil, "cbr0" }},
	{"prefix", func(n *servicetable.NodeConfig) {
		n.ClusterCIDRs, n.PodInterface, n.PodInterfacePrefix = nil, "veth", true
	}},
	{"none", func(n *servicetable.NodeConfig) { n.ClusterCIDRs = nil }},
	{"masquerade-all", func(n *servicetable.NodeConfig) { n.MasqueradeAll = true }},
	{"mark", func(n *servicetable.NodeConfig) { n.MasqueradeMark = 1 << 12 }},
	{"egress", func(n *servicetable.NodeConfig) { n.Egress = testEgress() }},
}

// TestRenderDetectLocalGolden pins the two places local traffic detection
// shows (the ClusterIP masquerade of traffic not from a pod, the
// externalTrafficPolicy Local short-circuit of pod traffic), --masquerade-all
// and a non-default masquerade mark.
func TestRenderDetectLocalGolden(t *testing.T) {
	f := features()
	var cip, etp feature
	for _, x := range f {
		switch x.name {
		case "clusterip":
			cip = x
		case "etp-local":
			etp = x
		}
	}
	for _, m := range detectModes {
		t.Run(m.name, func(t *testing.T) {
			n := testNode()
			m.edit(&n)
			tbl := build(t, n, append(cip.svcs, etp.svcs...), append(cip.slices, etp.slices...)...)
			goldentest.Check(t, "detect-"+m.name+"-ip.golden", Render(tbl, ipfamily.IPv4).Full())
		})
	}
}

// TestRenderDeterministic renders the whole feature table twice from
// separately built tables and expects the same bytes, and each family's
// ruleset to hold only its own ports.
func TestRenderDeterministic(t *testing.T) {
	for _, fam := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		a := Render(featureTable(t, testNode()), fam).Full()
		b := Render(featureTable(t, testNode()), fam).Full()
		if a != b {
			t.Fatalf("%v: two renders differ", fam)
		}
		rs := Render(featureTable(t, testNode()), fam)
		for _, p := range rs.Ports {
			for _, c := range p.Chains {
				if len(c.Name) > 28 {
					t.Errorf("chain %s longer than iptables' 28 characters", c.Name)
				}
			}
		}
	}
	goldentest.Check(t, "features-ip.golden", Render(featureTable(t, testNode()), ipfamily.IPv4).Full())
	goldentest.Check(t, "features-ip6.golden", Render(featureTable(t, testNode()), ipfamily.IPv6).Full())
}
