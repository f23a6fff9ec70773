package userspace

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// TableName is the name of the userspace plane's table in each family.
const TableName = "svcnet-userspace"

// Names of the table's objects. The four rule chains are kube-proxy's
// userspace chains: KUBE-PORTALS-CONTAINER and KUBE-NODEPORT-CONTAINER
// (traffic arriving on an interface, from pods or from outside: REDIRECT),
// KUBE-PORTALS-HOST and KUBE-NODEPORT-HOST (the node's own traffic: DNAT to
// a node address).
const (
	chainNatPrerouting     = "nat-prerouting"
	chainNatOutput         = "nat-output"
	chainNatPostrouting    = "nat-postrouting"
	chainPortalsContainer  = "portals-container"
	chainPortalsHost       = "portals-host"
	chainNodePortContainer = "nodeports-container"
	chainNodePortHost      = "nodeports-host"
	chainFilterPrerouting  = "filter-prerouting"
	chainFilterOutput      = "filter-output"
	chainFilterInput       = "filter-input"
	chainFilterForward     = "filter-forward"
	chainFilterOutputPost  = "filter-output-post-dnat"
	chainReject            = "reject-chain"
	setClusterIPs          = "cluster-ips"
	chainFirewallCheck     = "firewall-check"
	chainEndpointsCheck    = "endpoints-check"
	firewallPrefix         = "firewall-"
	setNodePortIPs         = "nodeport-ips"
)

// PortFunc returns the port the proxy port of k listens on; false when the
// proxy has none (its socket could not be opened), and the rules that would
// send traffic to it are left out.
type PortFunc func(k Key) (uint16, bool)

// familyConfig is what one family's table depends on besides the Service
// ports.
type familyConfig struct {
	fam ipfamily.Family
	// local detects traffic from local pods (zero: no detection).
	local localDetector
	// nodePortAddrs are the addresses NodePorts are served on (no loopback).
	nodePortAddrs []netip.Addr
	// host is where the node's own traffic is sent (DNAT): the first
	// NodePort address; invalid when there is none, and the node's own
	// traffic is redirected to loopback instead.
	host netip.Addr
	// egress is the family's egress masquerade (as the nftables plane's).
	egress servicetable.EgressRules
}

// localDetector says what traffic comes from a local pod, as the nftables
// plane reads NodeConfig (kube-proxy's LocalTrafficDetector): by source
// prefix, or by input interface name (or name prefix).
type localDetector servicetable.LocalTraffic

func (d localDetector) set() bool { return d.CIDR.IsValid() || d.Iface != "" }

// ifLocal matches traffic from a local pod: `ip saddr CIDR`, `iifname "cbr0"`.
func (d localDetector) ifLocal() nft.Expr {
	if d.CIDR.IsValid() {
		return nft.Saddr(d.CIDR)
	}
	return nft.IifnameMatch{Name: d.Iface, Prefix: d.IfacePrefix}
}

func configFor(f ipfamily.Family, n servicetable.NodeConfig) familyConfig {
	fc := familyConfig{fam: f, egress: n.Egress.For(f), local: localDetector(n.LocalTraffic(f)), nodePortAddrs: n.NodePortAddrs(f)}
	if len(fc.nodePortAddrs) > 0 {
		fc.host = fc.nodePortAddrs[0]
	}
	return fc
}

// Served reports whether the plane serves sp: TCP and UDP only. The proxy
// has no SCTP (Go's net package has no SCTP sockets, and a byte-stream
// splice would lose SCTP's message boundaries and streams), so an SCTP
// Service port gets neither a proxy port nor a rule.
func Served(sp *servicetable.ServicePort) bool {
	return sp.Protocol == model.ProtocolTCP || sp.Protocol == model.ProtocolUDP
}

// Render returns the redirect table of each of families (both when none
// given) for t, the rules sending each Service port's traffic to the proxy
// port ports names. It is pure: the same input renders byte-identically.
func Render(t *servicetable.Table, ports PortFunc, families ...ipfamily.Family) []*nft.Table {
	if len(families) == 0 {
		families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	}
	var out []*nft.Table
	for _, f := range families {
		out = append(out, renderFamily(configFor(f, t.Node), t.Ports, ports))
	}
	return out
}

// renderFamily returns the table of fc's family for the entries of that
// family (the served ones get rules; every ClusterIP is in cluster-ips).
func renderFamily(fc familyConfig, entries []*servicetable.ServicePort, ports PortFunc) *nft.Table {
	t := skeleton(fc)
	cips := t.Sets[setClusterIPs]
	for _, sp := range entries {
		if sp.Family == fc.fam && sp.ClusterIP.IsValid() {
			e := nft.Element{Key: []nft.Value{nft.A(sp.ClusterIP)}}
			cips.Elements[nft.KeyString(fc.fam, cips.Key, e.Key)] = e
		}
		if sp.Family == fc.fam && Served(sp) {
			r := portRenderer{fc: fc, sp: sp, t: t, ports: ports}
			r.render()
		}
	}
	return t
}

// skeleton returns the table's base chains, the four rule chains (empty)
// and the nodeport-ips set.
func skeleton(fc familyConfig) *nft.Table {
	t := nft.NewTable(fc.fam, TableName)
	chain := func(name string, hook *nft.Hook, rules ...*nft.Rule) {
		t.Chains[name] = &nft.Chain{Name: name, Hook: hook, Rules: rules}
	}
	// Source ranges are checked before the redirect (filter at -110, nat
	// at -100), on the original destination, as the nftables plane does;
	// so are Services without endpoints, for traffic arriving on an
	// interface (noEndpoints says why).
	ctNew := nft.CtStateMatch{States: nft.CtNew}
	chain(chainFilterPrerouting, &nft.Hook{Type: "filter", Hook: "prerouting", Priority: -110},
		nft.R(ctNew, nft.JumpTo(chainFirewallCheck)), nft.R(ctNew, nft.JumpTo(chainEndpointsCheck)))
	chain(chainFilterOutput, &nft.Hook{Type: "filter", Hook: "output", Priority: -110}, nft.R(ctNew, nft.JumpTo(chainFirewallCheck)))
	chain(chainFirewallCheck, nil)
	chain(chainEndpointsCheck, nil)
	// A proxy port whose endpoint set is empty answers the node's own new
	// connections, and drops those of a Local policy's empty set, in the
	// kernel, after the redirect (the node's traffic comes back in on lo).
	chain(chainFilterInput, &nft.Hook{Type: "filter", Hook: "input", Priority: -110})
	// Traffic to a ClusterIP that no rule redirected (a port the Service
	// does not have, or an SCTP port) is rejected rather than routed on,
	// as the nftables plane rejects it: forwarded traffic, and the node's
	// own after the nat output chain (-90).
	toClusterIP := func() *nft.Rule {
		return nft.R(ctNew, nft.Lookup{Fields: []nft.Field{nft.FieldDaddr}, Set: setClusterIPs}, nft.GotoTo(chainReject)).
			WithComment("reject traffic to invalid ports of ClusterIPs")
	}
	chain(chainFilterForward, &nft.Hook{Type: "filter", Hook: "forward", Priority: -110}, toClusterIP())
	chain(chainFilterOutputPost, &nft.Hook{Type: "filter", Hook: "output", Priority: -90}, toClusterIP())
	chain(chainReject, nil,
		nft.R(nft.ProtoMatch{Proto: nft.ProtoTCP}, nft.Reject{TCPReset: true}),
		nft.R(nft.Reject{}))
	t.Sets[setClusterIPs] = &nft.Set{Name: setClusterIPs, Key: []nft.Field{nft.FieldDaddr}, Comment: "Active ClusterIPs", Elements: map[string]nft.Element{}}
	chain(chainNatPrerouting, &nft.Hook{Type: "nat", Hook: "prerouting", Priority: -100},
		nft.R(nft.JumpTo(chainPortalsContainer)), nft.R(nft.JumpTo(chainNodePortContainer)))
	chain(chainNatOutput, &nft.Hook{Type: "nat", Hook: "output", Priority: -100},
		nft.R(nft.JumpTo(chainPortalsHost)), nft.R(nft.JumpTo(chainNodePortHost)))
	for _, n := range []string{chainPortalsContainer, chainPortalsHost, chainNodePortContainer, chainNodePortHost} {
		chain(n, nil)
	}
	ips := &nft.Set{Name: setNodePortIPs, Key: []nft.Field{nft.FieldDaddr}, Comment: "IPs that accept NodePort traffic", Elements: map[string]nft.Element{}}
	for _, a := range fc.nodePortAddrs {
		e := nft.Element{Key: []nft.Value{nft.A(a)}}
		ips.Elements[nft.KeyString(fc.fam, ips.Key, e.Key)] = e
	}
	t.Sets[ips.Name] = ips
	// Egress masquerade of pod traffic leaving the cluster: the node
	// setting every plane programs, in the nftables plane's chain.
	if c := nftables.EgressChain(fc.egress); c != nil {
		t.Chains[c.Name] = c
		chain(chainNatPostrouting, &nft.Hook{Type: "nat", Hook: "postrouting", Priority: 100}, nft.R(nft.JumpTo(c.Name)))
	}
	return t
}

// portRenderer renders one Service port's rules into t.
type portRenderer struct {
	fc    familyConfig
	sp    *servicetable.ServicePort
	t     *nft.Table
	ports PortFunc
}

func (r *portRenderer) add(chain string, comment string, rules ...*nft.Rule) {
	c := r.t.Chains[chain]
	for _, rule := range rules {
		if rule.Comment == "" {
			rule.Comment = r.sp.Name.String() + " " + comment
		}
		c.Rules = append(c.Rules, rule)
	}
}

// port returns the proxy port of the entry's set s.
func (r *portRenderer) port(s Set) (uint16, bool) {
	return r.ports(Key{ID: r.sp.ID, Family: r.sp.Family, Set: s})
}

func (r *portRenderer) proto() nft.ProtoMatch {
	if r.sp.Protocol == model.ProtocolUDP {
		return nft.ProtoMatch{Proto: nft.ProtoUDP}
	}
	return nft.ProtoMatch{Proto: nft.ProtoTCP}
}

// redirect returns match followed by the redirect to proxy port p of traffic
// arriving on an interface.
func (r *portRenderer) redirect(match []nft.Expr, p uint16) *nft.Rule {
	return nft.R(append(slices.Clone(match), nft.Redirect{Port: p})...)
}

// toHost returns match followed by the node's own traffic's way to proxy
// port p: DNAT to the node address (KUBE-PORTALS-HOST), or a redirect to
// loopback when the family has no NodePort address.
func (r *portRenderer) toHost(match []nft.Expr, p uint16) *nft.Rule {
	if r.fc.host.IsValid() {
		return nft.R(append(slices.Clone(match), nft.DNAT{To: netip.AddrPortFrom(r.fc.host, p)})...)
	}
	return r.redirect(match, p)
}

// external returns the rules for traffic arriving on an interface at an
// external frontend (NodePort, externalIP, LB IP): the cluster proxy port,
// or under externalTrafficPolicy Local the local one, with the
// short-circuit of pod traffic and of traffic from a node address to the
// cluster proxy port, as the nftables plane's external chain.
func (r *portRenderer) external(match []nft.Expr) []*nft.Rule {
	cport, cok := r.port(SetCluster)
	if !r.sp.ExternalPolicyLocal {
		if !cok {
			return nil
		}
		return []*nft.Rule{r.redirect(match, cport)}
	}
	var rules []*nft.Rule
	if cok {
		if r.fc.local.set() {
			rules = append(rules, r.redirect(append(slices.Clone(match), r.fc.local.ifLocal()), cport).
				WithComment(r.sp.Name.String()+" short-circuit pod traffic"))
		}
		rules = append(rules, r.redirect(append(slices.Clone(match), nft.FibLocal{Saddr: true}), cport).
			WithComment(r.sp.Name.String()+" short-circuit local traffic"))
	}
	if lport, ok := r.port(SetLocal); ok {
		rules = append(rules, r.redirect(match, lport).WithComment(r.sp.Name.String()+" local endpoints"))
	}
	return rules
}

// match matches the entry's protocol to address a, port port.
func (r *portRenderer) match(a netip.Addr, port uint16) []nft.Expr {
	return []nft.Expr{nft.Daddr(nft.Host(a)), r.proto(), nft.PortMatch{Field: nft.FieldDport, Port: port}}
}

// nodePortMatch matches the entry's NodePort on @nodeport-ips; nil when it
// has none or the node serves NodePorts on no address of the family.
func (r *portRenderer) nodePortMatch() []nft.Expr {
	if r.sp.NodePort == 0 || len(r.fc.nodePortAddrs) == 0 {
		return nil
	}
	return []nft.Expr{nft.Lookup{Fields: []nft.Field{nft.FieldDaddr}, Set: setNodePortIPs}, r.proto(),
		nft.PortMatch{Field: nft.FieldDport, Port: r.sp.NodePort}}
}

func (r *portRenderer) render() {
	sp := r.sp
	match := r.match
	internal := SetCluster
	if sp.InternalPolicyLocal {
		internal = SetLocal
	}
	if p, ok := r.port(internal); ok && sp.ClusterIP.IsValid() {
		m := match(sp.ClusterIP, sp.Port)
		r.add(chainPortalsContainer, "ClusterIP", r.redirect(m, p))
		r.add(chainPortalsHost, "ClusterIP", r.toHost(m, p))
	}
	r.noEndpoints()
	cport, cok := r.port(SetCluster)
	firewall := ""
	if len(sp.SourceRanges) > 0 && len(sp.LoadBalancerIPs) > 0 {
		firewall = r.firewall()
	}
	for _, fe := range sp.Frontends {
		if fe.Kind != servicetable.FrontendExternalIP && fe.Kind != servicetable.FrontendLoadBalancer {
			continue
		}
		m := match(fe.Addr, fe.Port)
		r.add(chainPortalsContainer, fe.Kind.String(), r.external(m)...)
		if cok {
			r.add(chainPortalsHost, fe.Kind.String(), r.toHost(m, cport))
		}
		if firewall != "" && fe.Kind == servicetable.FrontendLoadBalancer {
			r.add(chainFirewallCheck, "LoadBalancer", nft.R(append(slices.Clone(m), nft.GotoTo(firewall))...))
		}
	}
	if m := r.nodePortMatch(); m != nil {
		r.add(chainNodePortContainer, "NodePort", r.external(m)...)
		if cok {
			r.add(chainNodePortHost, "NodePort", r.toHost(m, cport))
		}
	}
}

// noEndpoints renders the kernel's answer to new connections that no
// endpoint can take, as the nftables plane answers them: a reject (TCP
// reset, ICMP port unreachable) when the Service port has no usable
// endpoint at all, a drop when it has some but none in the set the
// traffic's policy chose (a Local policy without a local endpoint). The
// proxy's own reset stays for a set that empties between two syncs.
//
// Traffic arriving on an interface to a Service without endpoints is
// rejected before the redirect, on each of its frontends (endpoints-check),
// so the answer leaves from the address the client asked for with no
// translation to undo. After the redirect it could not be relied on: a
// reset to a packet the bridge handed to IP (br_netfilter) is sent straight
// out of the bridge port, past the hooks where conntrack would put the
// Service's address back, and a pod on the bridge would get a reset from
// the proxy port and keep waiting. The node's own traffic is answered at
// input, after its DNAT (it comes back in on lo): its answer goes out
// through the hooks that undo it, and a UDP sender reads the refusal
// rather than failing its write, as a reject at output would make it.
//
// Drops are at input, after the redirect, at the proxy port of the empty
// set: a drop answers nothing, and which traffic reaches that set is the
// redirect rules' to say.
func (r *portRenderer) noEndpoints() {
	sp := r.sp
	if !sp.HasEndpoints {
		why := sp.Name.String() + " has no endpoints"
		reject := func(m []nft.Expr) {
			r.add(chainEndpointsCheck, "", nft.R(append(m, nft.GotoTo(chainReject))...).WithComment(why))
		}
		if sp.ClusterIP.IsValid() {
			reject(r.match(sp.ClusterIP, sp.Port))
		}
		for _, fe := range sp.Frontends {
			if fe.Kind == servicetable.FrontendExternalIP || fe.Kind == servicetable.FrontendLoadBalancer {
				reject(r.match(fe.Addr, fe.Port))
			}
		}
		if m := r.nodePortMatch(); m != nil {
			reject(m)
		}
	}
	for _, w := range wants(sp) {
		p, ok := r.port(w.key.Set)
		if !ok || len(w.eps) > 0 {
			continue
		}
		m := []nft.Expr{nft.CtStateMatch{States: nft.CtNew}, r.proto(), nft.PortMatch{Field: nft.FieldDport, Port: p}}
		v, why := nft.Expr(nft.Verdict{Kind: nft.Drop}), " has no "+w.key.Set.String()+" endpoints"
		if !sp.HasEndpoints {
			v, why = nft.Reject{TCPReset: sp.Protocol == model.ProtocolTCP}, " has no endpoints"
		}
		r.add(chainFilterInput, "", nft.R(append(m, v)...).WithComment(sp.Name.String()+why))
	}
}

// FirewallOf returns the Service port ID whose loadBalancerSourceRanges
// chain is chain; false when chain is not such a chain.
func FirewallOf(chain string) (id string, ok bool) {
	id, ok = strings.CutPrefix(chain, firewallPrefix)
	return id, ok && id != ""
}

// firewall renders the port's loadBalancerSourceRanges chain and returns its
// name: sources in the ranges return (on to the redirect), and so does the
// node's own traffic when an LB IP lies in the ranges (as kube-proxy lets
// an LB hairpin through); the rest is dropped.
func (r *portRenderer) firewall() string {
	sp := r.sp
	name := firewallPrefix + sp.ID
	rules := nftables.SourceRangeRules(sp)
	rules[0].Comment = sp.Name.String() + " loadBalancerSourceRanges"
	r.t.Chains[name] = &nft.Chain{Name: name, Rules: rules}
	return name
}
