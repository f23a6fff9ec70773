package nftables

import (
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
// Which destinations are exempt and which sources masqueraded is decided
// once for every plane (servicetable.EgressMasquerade.For).
//
// A nat chain sees only a connection's first packet, so its length costs one
// walk per new outgoing connection. Fully random port allocation, as
// svcnet's Service masquerade: pods of one node share its address, and
// per-connection random ports avoid the SNAT port race of concurrent
// connects (kubernetes#76699).

// chainEgressMasquerading is the egress masquerade chain's name.
const chainEgressMasquerading = "egress-masquerading"

// addEgress adds the egress masquerade chain to main table t and the jump
// to it at the end of nat postrouting; nothing when r is empty.
func addEgress(t *nft.Table, r servicetable.EgressRules) {
	c := EgressChain(r)
	if c == nil {
		return
	}
	t.Chains[c.Name] = c
	post := t.Chains[chainNatPostrouting]
	post.Rules = append(post.Rules, nft.R(nft.JumpTo(c.Name)))
}

// EgressChain returns the egress masquerade chain for r (nil when r is
// empty), for every plane that programs nf_tables: the userspace plane's
// table has the same chain.
func EgressChain(r servicetable.EgressRules) *nft.Chain {
	if len(r.PodCIDRs) == 0 {
		return nil
	}
	c := &nft.Chain{Name: chainEgressMasquerading}
	for _, x := range r.Exempt {
		c.Rules = append(c.Rules, nft.R(nft.Daddr(x.Prefix), nft.Verdict{Kind: nft.Return}).WithComment(x.Why))
	}
	for _, p := range r.PodCIDRs {
		c.Rules = append(c.Rules, nft.R(nft.Saddr(p), nft.Masquerade{FullyRandom: true}).WithComment(servicetable.EgressWhyMasq))
	}
	return c
}

// IsEgressChain reports whether chain is the egress masquerade chain of
// svcnet's main table (for the tracer's explanations).
func IsEgressChain(table, chain string) bool {
	return table == TableName && chain == chainEgressMasquerading
}
