package nftables

import (
	"net/netip"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// fragment is the part of a table that one Service port owns: its chains,
// affinity sets, and its elements in the shared maps and sets. A fragment's
// Sets entries for shared maps carry only the port's elements.
type fragment = nft.Table

func protoNum(p model.Protocol) uint32 {
	switch p {
	case model.ProtocolUDP:
		return nft.ProtoUDP
	case model.ProtocolSCTP:
		return nft.ProtoSCTP
	}
	return nft.ProtoTCP
}

// renderService returns the fragment of one Service port.
func renderService(fc familyConfig, sp *servicetable.ServicePort) *fragment {
	f := nft.NewTable(fc.Family, TableName)
	r := serviceRenderer{fc: fc, sp: sp, f: f, proto: protoNum(sp.Protocol)}
	r.render()
	return f
}

type serviceRenderer struct {
	fc    familyConfig
	sp    *servicetable.ServicePort
	f     *fragment
	proto uint32
}

func (r *serviceRenderer) chain(name string, rules ...*nft.Rule) {
	if len(rules) > 0 && rules[0].Comment == "" {
		rules[0].Comment = r.sp.Name.String()
	}
	r.f.Chains[name] = &nft.Chain{Name: name, Rules: rules}
}

func (r *serviceRenderer) element(set string, key []nft.Field, v *nft.Verdict, vals ...nft.Value) {
	s := r.f.Sets[set]
	if s == nil {
		s = &nft.Set{Name: set, Key: key, Verdict: v != nil, Elements: map[string]nft.Element{}}
		r.f.Sets[set] = s
	}
	e := nft.Element{Key: vals, Verdict: v}
	s.Elements[nft.KeyString(r.fc.Family, key, vals)] = e
}

// frontendElement puts addr . proto . port into a daddr-keyed map.
func (r *serviceRenderer) frontendElement(set string, addr netip.Addr, port uint16, v nft.Verdict) {
	r.element(set, keyDaddrProtoPort, &v, nft.A(addr), nft.N(r.proto), nft.N(uint32(port)))
}

func (r *serviceRenderer) render() {
	sp := r.sp
	hasInternal := sp.HasEndpoints
	if sp.InternalPolicyLocal {
		hasInternal = len(sp.LocalEndpoints) > 0
	}
	hasExternal := sp.HasEndpoints
	if sp.ExternalPolicyLocal {
		hasExternal = len(sp.LocalEndpoints) > 0
	}
	external := sp.HasExternalFrontends()
	usesExternalChain := sp.HasEndpoints && external
	usesCluster := sp.HasEndpoints && sp.UsesClusterEndpoints()
	usesLocal := sp.HasEndpoints && (sp.InternalPolicyLocal || (external && sp.ExternalPolicyLocal))

	internalChain := serviceChain(sp)
	if sp.InternalPolicyLocal {
		internalChain = localChain(sp)
	}
	// A Service with no usable endpoint rejects; one whose policy leaves no
	// endpoint on this node drops.
	noEndpoints := nft.Verdict{Kind: nft.Goto, Chain: chainReject}
	if sp.HasEndpoints {
		noEndpoints = nft.Verdict{Kind: nft.Drop}
	}

	var eps []servicetable.Endpoint
	if usesCluster {
		eps = append(eps, sp.ClusterEndpoints...)
		r.chain(serviceChain(sp), r.policyRules(sp.ClusterEndpoints, !sp.InternalPolicyLocal)...)
	}
	if usesLocal {
		eps = append(eps, sp.LocalEndpoints...)
		r.chain(localChain(sp), r.policyRules(sp.LocalEndpoints, sp.InternalPolicyLocal)...)
	}
	r.endpointChains(eps)

	if sp.ClusterIP.IsValid() {
		if hasInternal {
			r.frontendElement(mapServiceIPs, sp.ClusterIP, sp.Port, nft.GotoTo(internalChain))
		} else {
			r.frontendElement(mapNoEndpointServices, sp.ClusterIP, sp.Port, noEndpoints)
		}
	}
	if !external {
		return
	}
	if usesExternalChain {
		r.chain(externalChain(sp), r.externalRules()...)
	}
	firewall := r.firewall()
	for _, fe := range sp.Frontends {
		switch fe.Kind {
		case servicetable.FrontendExternalIP, servicetable.FrontendLoadBalancer:
			if usesExternalChain {
				r.frontendElement(mapServiceIPs, fe.Addr, fe.Port, nft.GotoTo(externalChain(sp)))
			}
			if !hasExternal {
				r.frontendElement(mapNoEndpointServices, fe.Addr, fe.Port, noEndpoints)
			}
			if firewall != "" && fe.Kind == servicetable.FrontendLoadBalancer {
				r.frontendElement(mapFirewallIPs, fe.Addr, fe.Port, nft.GotoTo(firewall))
			}
		}
	}
	if sp.NodePort != 0 && len(r.fc.NodePortAddrs) > 0 {
		key := []nft.Value{nft.N(r.proto), nft.N(uint32(sp.NodePort))}
		if usesExternalChain {
			v := nft.GotoTo(externalChain(sp))
			r.element(mapServiceNodePorts, keyProtoPort, &v, key...)
		}
		if !hasExternal {
			v := noEndpoints
			r.element(mapNoEndpointNodePorts, keyProtoPort, &v, key...)
		}
	}
}

// policyRules returns the rules of a policy chain (service-* or local-*):
// ClusterIP masquerading for traffic from outside the cluster (internal
// chain only), affinity lookups, then the random cascade over eps; with no
// endpoint, a drop.
func (r *serviceRenderer) policyRules(eps []servicetable.Endpoint, internal bool) []*nft.Rule {
	sp := r.sp
	var rules []*nft.Rule
	if internal && sp.ClusterIP.IsValid() {
		cip := nft.Daddr(nft.Host(sp.ClusterIP))
		port := nft.PortMatch{Field: nft.FieldDport, Port: sp.Port}
		proto := nft.ProtoMatch{Proto: uint8(r.proto)}
		switch {
		case r.fc.MasqueradeAll:
			rules = append(rules, nft.R(cip, proto, port, nft.JumpTo(chainMarkForMasquerade)))
		case r.fc.Local.set():
			rules = append(rules, nft.R(cip, proto, port, r.fc.Local.ifNotLocal(), nft.JumpTo(chainMarkForMasquerade)))
		}
	}
	if len(eps) == 0 {
		return append(rules, nft.R(nft.Verdict{Kind: nft.Drop}).WithComment(sp.Name.String()+" has no local endpoints"))
	}
	if sp.AffinityTimeout > 0 {
		for _, ep := range eps {
			rules = append(rules, nft.R(
				nft.Lookup{Fields: []nft.Field{nft.FieldSaddr}, Set: affinitySet(sp, ep)},
				nft.GotoTo(endpointChain(sp, ep))))
		}
	}
	n := len(eps)
	for i, ep := range eps {
		if i == n-1 {
			rules = append(rules, nft.R(nft.GotoTo(endpointChain(sp, ep))))
			break
		}
		rules = append(rules, nft.R(nft.Random{Mod: uint32(n - i), Value: 0}, nft.GotoTo(endpointChain(sp, ep))))
	}
	return rules
}

// endpointChains renders one chain per distinct endpoint (and its affinity set).
func (r *serviceRenderer) endpointChains(eps []servicetable.Endpoint) {
	sp := r.sp
	for _, ep := range eps {
		name := endpointChain(sp, ep)
		if _, ok := r.f.Chains[name]; ok {
			continue
		}
		rules := []*nft.Rule{
			// Hairpin: an endpoint reaching itself through the Service must be
			// masqueraded or its reply would bypass conntrack's reverse DNAT.
			nft.R(nft.Saddr(nft.Host(ep.Addr)), nft.JumpTo(chainMarkForMasquerade)),
		}
		if sp.AffinityTimeout > 0 {
			set := affinitySet(sp, ep)
			r.f.Sets[set] = &nft.Set{Name: set, Key: []nft.Field{nft.FieldSaddr}, Timeout: sp.AffinityTimeout, Elements: map[string]nft.Element{}}
			rules = append(rules, nft.R(nft.Update{Set: set, Fields: []nft.Field{nft.FieldSaddr}}))
		}
		rules = append(rules, nft.R(nft.ProtoMatch{Proto: uint8(r.proto)}, nft.DNAT{To: netip.AddrPortFrom(ep.Addr, ep.Port)}))
		r.chain(name, rules...)
	}
}

// externalRules returns the external-* chain: the entry for NodePort, LB and
// external IP traffic.
func (r *serviceRenderer) externalRules() []*nft.Rule {
	sp := r.sp
	if !sp.ExternalPolicyLocal {
		return []*nft.Rule{
			nft.R(nft.JumpTo(chainMarkForMasquerade)).WithComment("masquerade traffic from outside to " + sp.Name.String()),
			nft.R(nft.GotoTo(serviceChain(sp))),
		}
	}
	var rules []*nft.Rule
	if r.fc.Local.set() {
		rules = append(rules, nft.R(r.fc.Local.ifLocal(), nft.GotoTo(serviceChain(sp))).WithComment("short-circuit pod traffic"))
	}
	rules = append(rules,
		nft.R(nft.FibLocal{Saddr: true}, nft.JumpTo(chainMarkForMasquerade)).WithComment("masquerade local traffic"),
		nft.R(nft.FibLocal{Saddr: true}, nft.GotoTo(serviceChain(sp))).WithComment("short-circuit local traffic"),
		nft.R(nft.GotoTo(localChain(sp))),
	)
	return rules
}

// firewall renders the firewall-* chain for loadBalancerSourceRanges and
// returns its name, or "" when the port has no source ranges.
func (r *serviceRenderer) firewall() string {
	sp := r.sp
	if len(sp.SourceRanges) == 0 || len(sp.LoadBalancerIPs) == 0 {
		return ""
	}
	name := firewallChain(sp)
	r.chain(name, SourceRangeRules(sp)...)
	return name
}

// SourceRangeRules are the rules of a chain that lets sp's traffic from its
// loadBalancerSourceRanges through (return) and drops the rest: for every
// plane that programs nf_tables (the userspace plane's firewall chains are
// the same).
func SourceRangeRules(sp *servicetable.ServicePort) []*nft.Rule {
	var rules []*nft.Rule
	for _, p := range sp.SourceRanges {
		rules = append(rules, nft.R(nft.Saddr(p), nft.Verdict{Kind: nft.Return}))
	}
	// Traffic from the node itself may carry a node address after an LB
	// hairpin; kube-proxy allows it when an LB IP lies in the ranges.
	if sp.LoadBalancerIPInSourceRanges() {
		rules = append(rules, nft.R(nft.FibLocal{Saddr: true}, nft.Verdict{Kind: nft.Return}))
	}
	return append(rules, nft.R(nft.Verdict{Kind: nft.Drop}).WithComment("drop traffic to "+sp.Name.String()+" from outside loadBalancerSourceRanges"))
}
