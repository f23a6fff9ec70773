package iptables

import "github.com/svcnet/svcnet/internal/servicetable"

// ChainEgressMasq is svcnet's egress masquerade chain in the nat table: pod
// traffic leaving the cluster leaves the node with the node's address, as
// ip-masq-agent's IP-MASQ-AGENT chain does it in iptables (a chain of its
// own that nat POSTROUTING jumps to, RETURN for every destination left
// alone, then MASQUERADE):
//
//	-A SVCNET-EGRESS-MASQ -m comment --comment "to a pod: ..." -d 192.168.0.0/16 -j RETURN
//	-A SVCNET-EGRESS-MASQ -m comment --comment "to a Service ..." -d 10.96.0.0/12 -j RETURN
//	-A SVCNET-EGRESS-MASQ -m comment --comment "to link-local: ..." -d 169.254.0.0/16 -j RETURN
//	-A SVCNET-EGRESS-MASQ -m comment --comment "a pod's traffic ..." -s 192.168.0.0/16 -j MASQUERADE --random-fully
//
// Which destinations are exempt and which sources are masqueraded is the
// service table's decision (servicetable.EgressMasquerade.For), the same
// as the nftables plane's egress-masquerading chain; unlike ip-masq-agent,
// only traffic from a pod CIDR is masqueraded. The jump from POSTROUTING
// comes after the one to KUBE-POSTROUTING (Jumps), so a packet the Service
// masquerade took never gets here. The chain always exists (empty with
// egress masquerade off), so that the jump to it is always valid.
// MASQUERADE --random-fully, as KUBE-POSTROUTING's: pods of one node share
// its address, and per-connection random ports avoid the SNAT port race of
// concurrent connects (kubernetes#76699).
const ChainEgressMasq = "SVCNET-EGRESS-MASQ"

// egressRules are the rules of ChainEgressMasq for one family's egress
// masquerade; none when it is off.
func egressRules(e servicetable.EgressRules) []string {
	if len(e.PodCIDRs) == 0 {
		return nil
	}
	var rules []string
	for _, x := range e.Exempt {
		rules = append(rules, rule(comment(x.Why), "-d", x.Prefix.String(), "-j RETURN"))
	}
	for _, p := range e.PodCIDRs {
		rules = append(rules, rule(comment(servicetable.EgressWhyMasq), "-s", p.String(), "-j MASQUERADE --random-fully"))
	}
	return rules
}
