package proxy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/model"
)

// TestProxierEgressMasquerade: the proxier programs the egress masquerade
// from --cluster-cidr, whatever the detect-local mode (in mode NodeCIDR the
// Node's podCIDRs detect local traffic, but only the cluster CIDR holds every
// pod), with the Service and non-masquerade CIDRs exempt; off, none.
func TestProxierEgressMasquerade(t *testing.T) {
	cluster := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // rules of the egress chain, in order; nil: no chain
	}{
		{"on", Config{EgressMasquerade: true, ClusterCIDRs: cluster, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
			NonMasqueradeCIDRs: []netip.Prefix{netip.MustParsePrefix("172.26.0.0/16")}}, []string{
			"ip daddr 10.244.0.0/16 return", "ip daddr 10.96.0.0/12 return", "ip daddr 169.254.0.0/16 return",
			"ip daddr 172.26.0.0/16 return", "ip saddr 10.244.0.0/16 masquerade fully-random"}},
		{"mode NodeCIDR", Config{EgressMasquerade: true, ClusterCIDRs: cluster, DetectLocalMode: LocalModeNodeCIDR, MasqueradeLinkLocal: true}, []string{
			"ip daddr 10.244.0.0/16 return", "ip saddr 10.244.0.0/16 masquerade fully-random"}},
		{"off", Config{ClusterCIDRs: cluster}, nil},
		{"no cluster CIDR", Config{EgressMasquerade: true, DetectLocalMode: LocalModeBridgeInterface, PodBridgeInterface: "cbr0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run(t, tc.cfg, func(t *testing.T, h *harness) {
				h.store.Update(func(tx *model.Txn) {
					tx.SetService(service("web", "10.96.0.20", 80, model.ProtocolTCP))
					tx.SetEndpointSlice(slice("web", 80, model.ProtocolTCP, "10.244.2.10"))
					tx.SetNode(&model.Node{Name: "node1", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}})
					tx.SetSynced(true)
				})
				s := h.waitFor("web", func(s string) bool { return strings.Contains(s, "dnat to 10.244.2.10:80") })
				chain := chainRules(s, "egress-masquerading")
				if len(chain) != len(tc.want) {
					t.Fatalf("egress chain %q, want %q; table:\n%s", chain, tc.want, s)
				}
				for i, r := range chain {
					if !strings.HasPrefix(r, tc.want[i]) {
						t.Errorf("egress rule %d: %q, want %q...", i, r, tc.want[i])
					}
				}
				if jumps := strings.Contains(s, "jump egress-masquerading"); jumps != (tc.want != nil) {
					t.Errorf("nat-postrouting jumps to the egress chain: %v, want %v", jumps, tc.want != nil)
				}
			})
		})
	}
}

// chainRules returns the rule lines of chain name in a rendered table.
func chainRules(rendered, name string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(rendered, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "chain "+name+" {":
			in = true
		case in && l == "}":
			return out
		case in && l != "":
			out = append(out, l)
		}
	}
	return out
}

// TestConfigValidateEgressCIDRs: CIDRs with host bits or in IPv4-mapped
// form are refused, naming the setting.
func TestConfigValidateEgressCIDRs(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{NonMasqueradeCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/8")}},
			"non-masquerade CIDRs (--non-masquerade-cidrs): 10.0.0.1/8 has host bits set: the network is 10.0.0.0/8"},
		{Config{ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("::ffff:10.96.0.0/108")}},
			"service CIDRs (--service-cluster-ip-range): ::ffff:10.96.0.0/108 is an IPv4-mapped IPv6 prefix: write the IPv4 CIDR"},
		{Config{NonMasqueradeCIDRs: []netip.Prefix{{}}}, "non-masquerade CIDRs (--non-masquerade-cidrs): "},
	} {
		c := tc.cfg
		c.NodeName = "node1"
		err := c.WithDefaults().Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
