package servicetable

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// testEgress is the egress masquerade of the lab's plan: pod and Service
// networks of both families, two IPv4 non-masquerade CIDRs.
func testEgress() EgressMasquerade {
	return EgressMasquerade{
		PodCIDRs:           []netip.Prefix{cidr("192.168.0.0/16"), cidr("fd00:192:168::/56")},
		ServiceCIDRs:       []netip.Prefix{cidr("10.96.0.0/12"), cidr("fd00:96::/108")},
		NonMasqueradeCIDRs: []netip.Prefix{cidr("10.0.0.0/8"), cidr("198.18.0.0/15")},
	}
}

// TestEgressFor checks how one family's rules come from the settings: the
// family's prefixes only, masked, in order pods, Services, link-local,
// non-masquerade CIDRs, without one an earlier one covers; nothing at all
// without a pod CIDR of the family.
func TestEgressFor(t *testing.T) {
	x := func(p, why string) ExemptCIDR { return ExemptCIDR{Prefix: cidr(p), Why: why} }
	for _, tc := range []struct {
		name string
		f    ipfamily.Family
		in   EgressMasquerade
		want EgressRules
	}{
		{"off", ipfamily.IPv4, EgressMasquerade{}, EgressRules{}},
		{"no pod CIDR of the family", ipfamily.IPv6, EgressMasquerade{PodCIDRs: []netip.Prefix{cidr("192.168.0.0/16")},
			NonMasqueradeCIDRs: []netip.Prefix{cidr("fd00::/8")}}, EgressRules{}},
		{"IPv4 of dual-stack", ipfamily.IPv4, testEgress(), EgressRules{PodCIDRs: []netip.Prefix{cidr("192.168.0.0/16")}, Exempt: []ExemptCIDR{
			x("192.168.0.0/16", EgressWhyPods), x("10.96.0.0/12", EgressWhyServices), x("169.254.0.0/16", EgressWhyLink),
			x("10.0.0.0/8", EgressWhyNonMasq), x("198.18.0.0/15", EgressWhyNonMasq)}}},
		{"IPv6 of dual-stack", ipfamily.IPv6, testEgress(), EgressRules{PodCIDRs: []netip.Prefix{cidr("fd00:192:168::/56")}, Exempt: []ExemptCIDR{
			x("fd00:192:168::/56", EgressWhyPods), x("fd00:96::/108", EgressWhyServices), x("fe80::/10", EgressWhyLink)}}},
		{"link-local masqueraded", ipfamily.IPv4, EgressMasquerade{PodCIDRs: []netip.Prefix{cidr("10.244.0.0/16")}, MasqueradeLinkLocal: true},
			EgressRules{PodCIDRs: []netip.Prefix{cidr("10.244.0.0/16")}, Exempt: []ExemptCIDR{x("10.244.0.0/16", EgressWhyPods)}}},
		{"covered and repeated prefixes, host bits", ipfamily.IPv4, EgressMasquerade{
			PodCIDRs:           []netip.Prefix{cidr("10.244.1.0/24"), cidr("10.244.1.7/24"), cidr("10.245.0.0/16")},
			ServiceCIDRs:       []netip.Prefix{cidr("10.96.0.0/12")},
			NonMasqueradeCIDRs: []netip.Prefix{cidr("10.0.0.0/8"), cidr("10.96.3.0/24"), cidr("169.254.169.254/32")},
		}, EgressRules{PodCIDRs: []netip.Prefix{cidr("10.244.1.0/24"), cidr("10.245.0.0/16")}, Exempt: []ExemptCIDR{
			x("10.244.1.0/24", EgressWhyPods), x("10.245.0.0/16", EgressWhyPods), x("10.96.0.0/12", EgressWhyServices),
			x("169.254.0.0/16", EgressWhyLink), x("10.0.0.0/8", EgressWhyNonMasq)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.For(tc.f); !got.Equal(tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
