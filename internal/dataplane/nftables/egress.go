package nftables

import (
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Egress masquerade: pod traffic leaving the cluster leaves the node with the
// node's address (ip-masq-agent, the bridge plugin's ipMasq, kindnet), in one
// chain of the main table that nat postrouting jumps to after svcnet's
// Service masquerade (a packet that one masqueraded never gets here):
//
//	chain egress-masquerading {
//		ip daddr 192.168.0.0/16 return comment "..."   every exempt destination
//		ip daddr 10.96.0.0/12 return comment "..."
//		ip daddr 169.254.0.0/16 return comment "..."
//		ip saddr 192.168.0.0/16 masquerade fully-random comment "..."   one per pod CIDR
//	}
//
// A nat chain sees only a connection's first packet, so its length costs one
// walk per new outgoing connection. Fully random port allocation, as
// svcnet's Service masquerade: pods of one node share its address, and
// per-connection random ports avoid the SNAT port race of concurrent
// connects (kubernetes#76699).

// chainEgressMasquerading is the egress masquerade chain's name.
const chainEgressMasquerading = "egress-masquerading"

// Rule comments of the egress chain: what each exempt destination is.
const (
	egressWhyPods     = "to a pod: pod-to-pod traffic keeps its source"
	egressWhyServices = "to a Service network address: Service traffic has its own masquerade"
	egressWhyLink     = "to link-local: not masqueraded (masqLinkLocal off)"
	egressWhyNonMasq  = "to a non-masquerade CIDR"
	egressWhyMasq     = "a pod's traffic leaving the cluster: masqueraded to the node's address"
)

// egressRules is one family's egress masquerade: nothing when PodCIDRs is
// empty.
type egressRules struct {
	// PodCIDRs are the family's pod networks: the sources masqueraded.
	PodCIDRs []netip.Prefix
	// Exempt are the destinations never masqueraded, in rule order.
	Exempt []exemptCIDR
}

// exemptCIDR is one destination the egress masquerade leaves alone, and why.
type exemptCIDR struct {
	Prefix netip.Prefix
	Why    string
}

// Link-local destinations, left alone unless MasqueradeLinkLocal (as
// ip-masq-agent's masqLinkLocal and masqLinkLocalIPv6 default).
var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6 = netip.MustParsePrefix("fe80::/10")
)

// egressFor returns family f's part of e: its prefixes (masked), the exempt
// destinations in order pods, Services, link-local, non-masquerade CIDRs,
// each left out when an earlier one already covers it.
func egressFor(f ipfamily.Family, e servicetable.EgressMasquerade) egressRules {
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
	var r egressRules
	r.PodCIDRs = of(e.PodCIDRs)
	if len(r.PodCIDRs) == 0 {
		return egressRules{}
	}
	add := func(why string, ps ...netip.Prefix) {
		for _, p := range ps {
			if !r.covered(p) {
				r.Exempt = append(r.Exempt, exemptCIDR{Prefix: p, Why: why})
			}
		}
	}
	add(egressWhyPods, r.PodCIDRs...)
	add(egressWhyServices, of(e.ServiceCIDRs)...)
	if !e.MasqueradeLinkLocal {
		add(egressWhyLink, of([]netip.Prefix{linkLocal4, linkLocal6})...)
	}
	add(egressWhyNonMasq, of(e.NonMasqueradeCIDRs)...)
	return r
}

// covered reports whether an exempt prefix already holds all of p.
func (r egressRules) covered(p netip.Prefix) bool {
	for _, x := range r.Exempt {
		if x.Prefix.Bits() <= p.Bits() && x.Prefix.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// equal reports whether a and b render the same rules.
func (a egressRules) equal(b egressRules) bool {
	return slices.Equal(a.PodCIDRs, b.PodCIDRs) && slices.Equal(a.Exempt, b.Exempt)
}

// addEgress adds the egress masquerade chain to main table t and the jump
// to it at the end of nat postrouting; nothing when r is empty.
func addEgress(t *nft.Table, r egressRules) {
	if len(r.PodCIDRs) == 0 {
		return
	}
	c := &nft.Chain{Name: chainEgressMasquerading}
	for _, x := range r.Exempt {
		c.Rules = append(c.Rules, nft.R(nft.Daddr(x.Prefix), nft.Verdict{Kind: nft.Return}).WithComment(x.Why))
	}
	for _, p := range r.PodCIDRs {
		c.Rules = append(c.Rules, nft.R(nft.Saddr(p), nft.Masquerade{FullyRandom: true}).WithComment(egressWhyMasq))
	}
	t.Chains[c.Name] = c
	post := t.Chains[chainNatPostrouting]
	post.Rules = append(post.Rules, nft.R(nft.JumpTo(chainEgressMasquerading)))
}

// IsEgressChain reports whether chain is the egress masquerade chain of
// svcnet's main table (for the tracer's explanations).
func IsEgressChain(table, chain string) bool {
	return table == TableName && chain == chainEgressMasquerading
}
