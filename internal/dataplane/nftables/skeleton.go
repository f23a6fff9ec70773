package nftables

import (
	"net/netip"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// familyConfig is what the rendering of one family's table depends on besides
// the Service ports.
type familyConfig struct {
	Family ipfamily.Family
	// Local detects pod-originated traffic (zero: no detection).
	Local localDetector
	// MasqueradeAll masquerades all traffic to ClusterIPs.
	MasqueradeAll bool
	// Mark is the masquerade mark bit (never 0).
	Mark uint32
	// NodePortAddrs are the addresses NodePorts are served on (no loopback).
	NodePortAddrs []netip.Addr
	// Egress is the family's egress masquerade (egress.go).
	Egress servicetable.EgressRules
}

// localDetector says what traffic comes from a local pod, as kube-proxy's
// LocalTrafficDetector (pkg/proxy/util/localdetector.go): by source prefix
// (modes ClusterCIDR and NodeCIDR), by input interface name (BridgeInterface)
// or name prefix (InterfaceNamePrefix). The zero value detects nothing.
type localDetector servicetable.LocalTraffic

// set reports whether the detector detects anything.
func (d localDetector) set() bool { return d.CIDR.IsValid() || d.Iface != "" }

// ifLocal matches traffic from a local pod: `ip saddr CIDR`, `iifname "cbr0"`,
// `iifname "veth*"`.
func (d localDetector) ifLocal() nft.Expr {
	if d.CIDR.IsValid() {
		return nft.Saddr(d.CIDR)
	}
	return nft.IifnameMatch{Name: d.Iface, Prefix: d.IfacePrefix}
}

// ifNotLocal matches all other traffic (`!=` of ifLocal).
func (d localDetector) ifNotLocal() nft.Expr {
	if d.CIDR.IsValid() {
		return nft.AddrMatch{Field: nft.FieldSaddr, Neq: true, Prefix: d.CIDR}
	}
	return nft.IifnameMatch{Name: d.Iface, Prefix: d.IfacePrefix, Neq: true}
}

var (
	keyDaddrProtoPort = []nft.Field{nft.FieldDaddr, nft.FieldL4Proto, nft.FieldDport}
	keyProtoPort      = []nft.Field{nft.FieldL4Proto, nft.FieldDport}
)

// renderMain returns the main table's skeleton: the filter chains and the
// maps they use (their elements belong to Service ports), the cluster-ips and
// nodeport-ips sets, which Service ports share (two ports of a Service have
// one ClusterIP), so they are computed here for all at once, and the
// masquerades in postrouting (Service traffic by mark, then egress).
func renderMain(fc familyConfig, clusterIPs []netip.Addr) *nft.Table {
	t := nft.NewTable(fc.Family, TableName)
	addSet := func(s *nft.Set) { s.Elements = map[string]nft.Element{}; t.Sets[s.Name] = s }
	addSet(&nft.Set{Name: mapFirewallIPs, Key: keyDaddrProtoPort, Verdict: true, Comment: "destinations that are subject to LoadBalancerSourceRanges"})
	addSet(&nft.Set{Name: mapNoEndpointServices, Key: keyDaddrProtoPort, Verdict: true, Comment: "vmap to drop or reject packets to services with no endpoints"})
	addSet(&nft.Set{Name: mapNoEndpointNodePorts, Key: keyProtoPort, Verdict: true, Comment: "vmap to drop or reject packets to service nodeports with no endpoints"})
	cips := &nft.Set{Name: setClusterIPs, Key: []nft.Field{nft.FieldDaddr}, Comment: "Active ClusterIPs"}
	addSet(cips)
	for _, a := range clusterIPs {
		e := nft.Element{Key: []nft.Value{nft.A(a)}}
		cips.Elements[nft.KeyString(fc.Family, cips.Key, e.Key)] = e
	}
	addNodePortIPs(t, fc)

	chain := func(name string, hook *nft.Hook, rules ...*nft.Rule) {
		t.Chains[name] = &nft.Chain{Name: name, Hook: hook, Rules: rules}
	}
	regular := func(name string, rules ...*nft.Rule) { chain(name, nil, rules...) }
	ctNew := nft.CtStateMatch{States: nft.CtNew}
	hook := func(typ, h string, prio int) *nft.Hook { return &nft.Hook{Type: typ, Hook: h, Priority: prio} }

	// Filtering happens in filter chains just before (prerouting, output:
	// source ranges, on the original destination) or after DNAT (input,
	// forward, output at -90: no endpoints, unknown ClusterIP ports).
	//
	// Every check is of a new connection's first packet or of an invalid one,
	// and nearly every packet is neither: a base chain of more than one rule
	// lets established and related packets go by its first rule, one ct
	// lookup instead of one per rule. perf at 10k Services, keep-alive
	// through a ClusterIP: nft_* took 1.4-1.6% of the busy CPU with a rule per
	// check, kube-proxy's (fewer rules per hook) 1.2-1.3%.
	settled := nft.R(nft.CtStateMatch{States: nft.CtEstablished | nft.CtRelated}, nft.Verdict{Kind: nft.Accept})
	chain(chainFilterPrerouting, hook("filter", "prerouting", -110),
		nft.R(ctNew, nft.JumpTo(chainFirewallCheck)))
	chain(chainFilterInput, hook("filter", "input", -110),
		settled,
		nft.R(ctNew, nft.JumpTo(chainNodePortEPCheck)),
		nft.R(ctNew, nft.JumpTo(chainServiceEPCheck)))
	chain(chainFilterForward, hook("filter", "forward", -110),
		settled,
		// Conntrack-INVALID packets would otherwise reach pods un-DNATed and
		// reset connections (kubernetes#74839), as kube-proxy drops them.
		nft.R(nft.CtStateMatch{States: nft.CtInvalid}, nft.Verdict{Kind: nft.Drop}),
		nft.R(ctNew, nft.JumpTo(chainServiceEPCheck)),
		nft.R(ctNew, nft.JumpTo(chainClusterIPsCheck)))
	chain(chainFilterOutput, hook("filter", "output", -110),
		settled,
		nft.R(ctNew, nft.JumpTo(chainServiceEPCheck)),
		nft.R(ctNew, nft.JumpTo(chainFirewallCheck)))
	chain(chainFilterOutputPost, hook("filter", "output", -90),
		nft.R(ctNew, nft.JumpTo(chainClusterIPsCheck)))
	chain(chainNatPostrouting, hook("nat", "postrouting", 100), nft.R(nft.JumpTo(chainMasquerading)))

	regular(chainFirewallCheck,
		nft.R(nft.VMap{Fields: keyDaddrProtoPort, Map: mapFirewallIPs}))
	regular(chainServiceEPCheck,
		nft.R(nft.VMap{Fields: keyDaddrProtoPort, Map: mapNoEndpointServices}))
	regular(chainNodePortEPCheck,
		nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldDaddr}, Set: setNodePortIPs}, nft.VMap{Fields: keyProtoPort, Map: mapNoEndpointNodePorts}))
	regular(chainClusterIPsCheck,
		nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldDaddr}, Set: setClusterIPs}, nft.GotoTo(chainReject)).
			WithComment("reject traffic to invalid ports of ClusterIPs"))
	regular(chainReject,
		nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.Reject{TCPReset: true}),
		nft.R(nft.Reject{}))
	regular(chainMasquerading,
		nft.R(nft.MarkMatch{Mask: fc.Mark, Value: 0}, nft.Verdict{Kind: nft.Return}),
		nft.R(nft.SetMark{Op: nft.MarkXor, Value: fc.Mark}),
		nft.R(nft.Masquerade{FullyRandom: true}))
	addEgress(t, fc.Egress)
	return t
}

// renderShard returns the skeleton of shard table name: nat base chains that
// dispatch through its service-ips and service-nodeports maps (their elements
// belong to the shard's Service ports) and the masquerade mark.
func renderShard(fc familyConfig, name string) *nft.Table {
	t := nft.NewTable(fc.Family, name)
	for _, s := range []*nft.Set{
		{Name: mapServiceIPs, Key: keyDaddrProtoPort, Verdict: true, Comment: "ClusterIP, ExternalIP and LoadBalancer IP traffic"},
		{Name: mapServiceNodePorts, Key: keyProtoPort, Verdict: true, Comment: "NodePort traffic"},
	} {
		s.Elements = map[string]nft.Element{}
		t.Sets[s.Name] = s
	}
	addNodePortIPs(t, fc)
	chain := func(name string, hook *nft.Hook, rules ...*nft.Rule) {
		t.Chains[name] = &nft.Chain{Name: name, Hook: hook, Rules: rules}
	}
	chain(chainNatPrerouting, &nft.Hook{Type: "nat", Hook: "prerouting", Priority: -100}, nft.R(nft.JumpTo(chainServices)))
	chain(chainNatOutput, &nft.Hook{Type: "nat", Hook: "output", Priority: -100}, nft.R(nft.JumpTo(chainServices)))
	chain(chainMarkForMasquerade, nil,
		nft.R(nft.SetMark{Op: nft.MarkOr, Value: fc.Mark}))
	chain(chainServices, nil,
		nft.R(nft.VMap{Fields: keyDaddrProtoPort, Map: mapServiceIPs}),
		nft.R(nft.Lookup{Fields: []nft.Field{nft.FieldDaddr}, Set: setNodePortIPs}, nft.VMap{Fields: keyProtoPort, Map: mapServiceNodePorts}))
	return t
}

// addNodePortIPs adds the nodeport-ips set: the node addresses NodePorts are
// served on (the main table's filter and each shard's dispatch use it).
func addNodePortIPs(t *nft.Table, fc familyConfig) {
	nodeIPs := &nft.Set{Name: setNodePortIPs, Key: []nft.Field{nft.FieldDaddr}, Comment: "IPs that accept NodePort traffic", Elements: map[string]nft.Element{}}
	t.Sets[nodeIPs.Name] = nodeIPs
	for _, a := range fc.NodePortAddrs {
		if a.IsLoopback() {
			continue // CVE-2020-8558: never serve NodePorts on 127.0.0.1
		}
		e := nft.Element{Key: []nft.Value{nft.A(a)}}
		nodeIPs.Elements[nft.KeyString(fc.Family, nodeIPs.Key, e.Key)] = e
	}
}
