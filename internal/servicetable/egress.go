package servicetable

import (
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// EgressRules is one family's egress masquerade as every data plane renders
// it: an exempt destination returns (in order), then traffic from a pod
// CIDR is masqueraded. The zero value (no pod CIDR of the family)
// masquerades nothing.
type EgressRules struct {
	// PodCIDRs are the family's pod networks: the sources masqueraded.
	PodCIDRs []netip.Prefix
	// Exempt are the destinations never masqueraded, in rule order.
	Exempt []ExemptCIDR
}

// ExemptCIDR is one destination the egress masquerade leaves alone, and why
// (the planes write Why as the rule's comment).
type ExemptCIDR struct {
	Prefix netip.Prefix
	Why    string
}

// Why an exempt destination is exempt, and what the masquerade rule does:
// the rule comments of the egress chains.
const (
	EgressWhyPods     = "to a pod: pod-to-pod traffic keeps its source"
	EgressWhyServices = "to a Service network address: Service traffic has its own masquerade"
	EgressWhyLink     = "to link-local: not masqueraded (masqLinkLocal off)"
	EgressWhyNonMasq  = "to a non-masquerade CIDR"
	EgressWhyMasq     = "a pod's traffic leaving the cluster: masqueraded to the node's address"
)

// Link-local destinations, left alone unless MasqueradeLinkLocal (as
// ip-masq-agent's masqLinkLocal and masqLinkLocalIPv6 default).
var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6 = netip.MustParsePrefix("fe80::/10")
)

// For returns family f's part of e: its prefixes (masked, repeated ones
// once), the exempt destinations in order pods, Services, link-local,
// non-masquerade CIDRs, each left out when an earlier one already covers
// it; nothing at all without a pod CIDR of the family.
func (e EgressMasquerade) For(f ipfamily.Family) EgressRules {
	is6 := f == ipfamily.IPv6
	of := func(ps []netip.Prefix) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range ps {
			if p.IsValid() && p.Addr().Unmap().Is6() == is6 && !slices.Contains(out, p.Masked()) {
				out = append(out, p.Masked())
			}
		}
		return out
	}
	var r EgressRules
	r.PodCIDRs = of(e.PodCIDRs)
	if len(r.PodCIDRs) == 0 {
		return EgressRules{}
	}
	add := func(why string, ps ...netip.Prefix) {
		for _, p := range ps {
			if !r.covered(p) {
				r.Exempt = append(r.Exempt, ExemptCIDR{Prefix: p, Why: why})
			}
		}
	}
	add(EgressWhyPods, r.PodCIDRs...)
	add(EgressWhyServices, of(e.ServiceCIDRs)...)
	if !e.MasqueradeLinkLocal {
		add(EgressWhyLink, of([]netip.Prefix{linkLocal4, linkLocal6})...)
	}
	add(EgressWhyNonMasq, of(e.NonMasqueradeCIDRs)...)
	return r
}

// covered reports whether an exempt prefix already holds all of p.
func (r EgressRules) covered(p netip.Prefix) bool {
	for _, x := range r.Exempt {
		if x.Prefix.Bits() <= p.Bits() && x.Prefix.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// Equal reports whether r and o render the same rules.
func (r EgressRules) Equal(o EgressRules) bool {
	return slices.Equal(r.PodCIDRs, o.PodCIDRs) && slices.Equal(r.Exempt, o.Exempt)
}
