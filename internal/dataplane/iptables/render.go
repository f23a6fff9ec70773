package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Chain is one chain: its name and its rules, each rule the text that follows
// "-A <name> " in iptables-restore input.
type Chain struct {
	Name  string
	Rules []string
}

// shared names a chain that many Service ports add rules to.
type shared int

const (
	natServices     shared = iota // nat KUBE-SERVICES: ClusterIP, external IP, LB IP dispatch
	natNodePorts                  // nat KUBE-NODEPORTS: NodePort dispatch
	filterServices                // filter KUBE-SERVICES: ClusterIPs without endpoints
	filterExternal                // filter KUBE-EXTERNAL-SERVICES: external frontends without endpoints
	filterNodePorts               // filter KUBE-NODEPORTS: health check node ports
	filterFirewall                // filter KUBE-PROXY-FIREWALL: loadBalancerSourceRanges drops
	numShared
)

// Port is the fragment of the ruleset that one Service port owns: its nat
// chains and its rules in the shared chains. A partial restore rewrites the
// chains of changed ports only; the shared chains are small (a rule per
// frontend) and always rewritten whole.
type Port struct {
	// ID is the Service port's servicetable ID.
	ID string
	// Chains are the nat chains the port owns, in the order KUBE-SVC,
	// KUBE-SVL, KUBE-EXT, KUBE-FW, then one KUBE-SEP per reachable
	// endpoint (sorted by address, then port).
	Chains []*Chain
	// shared holds the port's rules in each shared chain, in order.
	shared [numShared][]string
	// hash is the hash its chains are named by.
	hash string
}

// localDetector matches traffic from a local pod, as kube-proxy's
// LocalTrafficDetector: by source prefix (ClusterCIDR, NodeCIDR), by input
// interface (BridgeInterface) or interface name prefix (InterfaceNamePrefix).
// The zero value detects nothing.
type localDetector servicetable.LocalTraffic

func (d localDetector) set() bool { return d.CIDR.IsValid() || d.Iface != "" }

func (d localDetector) iface() string {
	if d.IfacePrefix {
		return d.Iface + "+"
	}
	return d.Iface
}

// ifLocal is `-s CIDR`, `-i cbr0` or `-i veth+` (kube-proxy's IfLocal).
func (d localDetector) ifLocal() string {
	if d.CIDR.IsValid() {
		return "-s " + d.CIDR.String()
	}
	return "-i " + d.iface()
}

// ifNotLocal is the negation (kube-proxy's IfNotLocal).
func (d localDetector) ifNotLocal() string {
	if d.CIDR.IsValid() {
		return "! -s " + d.CIDR.String()
	}
	return "! -i " + d.iface()
}

// config is what one family's ruleset depends on besides the Service ports.
type config struct {
	Family        ipfamily.Family
	Local         localDetector
	MasqueradeAll bool
	// Mark is the masquerade mark bit (never 0).
	Mark uint32
	// NodePortAddrs are the addresses NodePorts are served on, sorted.
	NodePortAddrs []netip.Addr
	// Egress is the family's egress masquerade (egress.go).
	Egress servicetable.EgressRules
}

// equal reports whether two configs render the same shared rules.
func (c config) equal(o config) bool {
	return c.Family == o.Family && c.Local == o.Local && c.MasqueradeAll == o.MasqueradeAll && c.Mark == o.Mark &&
		slices.Equal(c.NodePortAddrs, o.NodePortAddrs) && c.Egress.Equal(o.Egress)
}

func configFor(n servicetable.NodeConfig, f ipfamily.Family) config {
	return config{Family: f, MasqueradeAll: n.MasqueradeAll, Mark: n.Mark(), Egress: n.Egress.For(f),
		Local: localDetector(n.LocalTraffic(f)), NodePortAddrs: n.NodePortAddrs(f)}
}

// mark is the mark as iptables-save prints it ("0x4000").
func (c config) mark() string { return "0x" + strconv.FormatUint(uint64(c.Mark), 16) }

// reject is the REJECT target of the family, with the ICMP type iptables-save
// prints for it.
func (c config) reject() string {
	if c.Family == ipfamily.IPv6 {
		return "REJECT --reject-with icmp6-port-unreachable"
	}
	return "REJECT --reject-with icmp-port-unreachable"
}

// Ruleset is one family's rendered filter and nat tables.
//
// A Ruleset is not changed after Render; its methods are for one goroutine
// at a time (the shared chains are computed once, on first use).
type Ruleset struct {
	Family ipfamily.Family
	// Ports are the fragments of the family's Service ports, sorted by ID.
	Ports []*Port
	cfg   config
	// from maps each entry to its fragment, for RenderReusing.
	from map[*servicetable.ServicePort]*Port
	// fixed memoizes fixedChains per table.
	fixed map[string][]*Chain
}

// Render returns family's ruleset for the service table t.
func Render(t *servicetable.Table, family ipfamily.Family) *Ruleset {
	return RenderReusing(t, family, nil)
}

// RenderReusing is Render reusing prev's fragments of the entries t still
// holds (the same *ServicePort: the service table replaces an entry when it
// changes) when prev was rendered with the same node settings. The
// proxier's partial syncs then render only the changed Service ports:
// rendering 10,000 ports takes about 0.3 s here, most of it writing rules
// in iptables-save's form.
func RenderReusing(t *servicetable.Table, family ipfamily.Family, prev *Ruleset) *Ruleset {
	rs := &Ruleset{Family: family, cfg: configFor(t.Node, family), from: map[*servicetable.ServicePort]*Port{}}
	if prev != nil && !prev.cfg.equal(rs.cfg) {
		prev = nil
	}
	for _, sp := range t.Ports {
		if sp.Family != family {
			continue
		}
		p := prev.reuse(sp)
		if p == nil {
			p = renderPort(rs.cfg, sp)
		}
		rs.Ports = append(rs.Ports, p)
		rs.from[sp] = p
	}
	return rs
}

// portByID returns rs's fragment of the port with this ID, nil if none.
func (rs *Ruleset) portByID(id string) *Port {
	i, ok := slices.BinarySearchFunc(rs.Ports, id, func(p *Port, id string) int { return strings.Compare(p.ID, id) })
	if !ok {
		return nil
	}
	return rs.Ports[i]
}

// reuseFixed takes prev's shared chains as rs's: for a caller that knows
// every port's share of them is the same in both (same ports, same rules).
func (rs *Ruleset) reuseFixed(prev *Ruleset) {
	rs.fixed = map[string][]*Chain{}
	for _, table := range []string{TableFilter, TableNAT} {
		rs.fixed[table] = prev.fixedChains(table)
	}
}

// reuse returns the fragment rs rendered for sp, nil if none.
func (rs *Ruleset) reuse(sp *servicetable.ServicePort) *Port {
	if rs == nil {
		return nil
	}
	return rs.from[sp]
}

// rule joins the words of a rule.
func rule(words ...string) string { return strings.Join(words, " ") }

// comment is `-m comment --comment TEXT`, TEXT quoted when it must be, as
// iptables-save prints it.
func comment(text string) string {
	if strings.ContainsAny(text, " \t\"'\\") {
		text = `"` + strings.ReplaceAll(text, `"`, `\"`) + `"`
	}
	return "-m comment --comment " + text
}

// match is `-m P -p P -d ADDR --dport PORT`.
func match(proto string, addr netip.Addr, port uint16) string {
	return rule("-m", proto, "-p", proto, "-d", addr.String(), "--dport", strconv.Itoa(int(port)))
}

// probability is kube-proxy's: 1/n with ten decimals.
func probability(n int) string { return fmt.Sprintf("%0.10f", 1.0/float64(n)) }

type portRenderer struct {
	c     config
	sp    *servicetable.ServicePort
	p     *Port
	name  string // "ns/name:port"
	proto string // "tcp", "udp", "sctp"
}

func (r *portRenderer) add(s shared, words ...string) {
	r.p.shared[s] = append(r.p.shared[s], rule(words...))
}

func (r *portRenderer) chain(name string, rules ...string) {
	r.p.Chains = append(r.p.Chains, &Chain{Name: name, Rules: rules})
}

// renderPort renders one Service port as kube-proxy's syncProxyRules does,
// from the endpoint sets the table decided.
func renderPort(c config, sp *servicetable.ServicePort) *Port {
	r := &portRenderer{c: c, sp: sp, p: &Port{ID: sp.ID, hash: portHash(sp)}, name: sp.Name.String(), proto: strings.ToLower(string(sp.Protocol))}
	r.render()
	for _, ch := range r.p.Chains {
		canonical(c.Family, ch.Rules)
	}
	for i := range r.p.shared {
		canonical(c.Family, r.p.shared[i])
	}
	return r.p
}

// canonical rewrites rules, in place, in the form iptables-save prints them
// back (internal/iptables.Canonical), so that what the plane renders, what
// the kernel holds and what a user reads with iptables-save are one text,
// and a read-back compares equal rule for rule. The rules are the
// renderer's own: one it cannot parse is a bug in the renderer.
func canonical(f ipfamily.Family, rules []string) {
	for i, r := range rules {
		c, err := ipt.Canonical(f, r)
		if err != nil {
			panic(fmt.Sprintf("iptables renderer wrote a rule it cannot read: %v", err))
		}
		rules[i] = c
	}
}

func (r *portRenderer) render() {
	sp, c := r.sp, r.c
	svc, svl, ext, fw := ClusterChain(sp), LocalChain(sp), ExternalChain(sp), FirewallChain(sp)

	// A policy chain exists only with endpoints to pick from: the nat
	// table cannot DROP, so an empty set is handled in the filter table.
	usesCluster := len(sp.ClusterEndpoints) > 0 && sp.UsesClusterEndpoints()
	usesLocal := len(sp.LocalEndpoints) > 0 && sp.UsesLocalEndpoints()
	internalChain, hasInternal := svc, usesCluster
	if sp.InternalPolicyLocal {
		internalChain, hasInternal = svl, usesLocal
	}
	externalPolicy, hasExternal := svc, usesCluster
	if sp.ExternalPolicyLocal {
		externalPolicy, hasExternal = svl, usesLocal
	}
	external := sp.HasExternalFrontends()
	// The external chain is needed even without external endpoints: it
	// holds the short-circuit of pod and node traffic.
	usesExternal := sp.HasEndpoints && external
	lbFrontends := slices.ContainsFunc(sp.Frontends, func(f servicetable.Frontend) bool {
		return f.Kind == servicetable.FrontendLoadBalancer
	})
	usesFirewall := sp.HasEndpoints && lbFrontends && len(sp.SourceRanges) > 0
	lbChain := ext
	if usesFirewall {
		lbChain = fw
	}

	// No usable endpoint anywhere rejects; a Local policy with none on this
	// node drops.
	internalTarget, internalComment := c.reject(), r.name+" has no endpoints"
	externalTarget, externalComment := internalTarget, internalComment
	if sp.HasEndpoints {
		internalTarget, internalComment = "DROP", r.name+" has no local endpoints"
		externalTarget, externalComment = internalTarget, internalComment
	}

	if sp.ClusterIP.IsValid() {
		m := match(r.proto, sp.ClusterIP, sp.Port)
		if hasInternal {
			r.add(natServices, comment(r.name+" cluster IP"), m, "-j", internalChain)
		} else {
			r.add(filterServices, comment(internalComment), m, "-j", internalTarget)
		}
	}
	// External IPs and LB IPs as the table lists them: an address that is
	// both appears once, as an external IP.
	for _, fe := range sp.Frontends {
		m := match(r.proto, fe.Addr, fe.Port)
		switch fe.Kind {
		case servicetable.FrontendExternalIP:
			if usesExternal {
				r.add(natServices, comment(r.name+" external IP"), m, "-j", ext)
			}
		case servicetable.FrontendLoadBalancer:
			if usesExternal {
				r.add(natServices, comment(r.name+" loadbalancer IP"), m, "-j", lbChain)
			}
			if usesFirewall {
				r.add(filterFirewall, comment(r.name+" traffic not accepted by "+fw), m, "-j", "DROP")
			}
		default:
			continue
		}
		if !hasExternal {
			r.add(filterExternal, comment(externalComment), m, "-j", externalTarget)
		}
	}
	if sp.NodePort != 0 && len(c.NodePortAddrs) > 0 {
		np := strconv.Itoa(int(sp.NodePort))
		if usesExternal {
			r.add(natNodePorts, comment(r.name), "-m", r.proto, "-p", r.proto, "--dport", np, "-j", ext)
		}
		if !hasExternal {
			for _, a := range c.NodePortAddrs {
				r.add(filterExternal, comment(externalComment), match(r.proto, a, sp.NodePort), "-j", externalTarget)
			}
		}
	}
	if sp.HealthCheckNodePort != 0 {
		r.add(filterNodePorts, comment(r.name+" health check node port"),
			"-m tcp -p tcp --dport", strconv.Itoa(int(sp.HealthCheckNodePort)), "-j ACCEPT")
	}

	// Masquerade ClusterIP traffic from outside the cluster (or all of it),
	// first in the internal chain.
	var masq []string
	if hasInternal && sp.ClusterIP.IsValid() {
		m := rule(comment(r.name+" cluster IP"), match(r.proto, sp.ClusterIP, sp.Port))
		switch {
		case c.MasqueradeAll:
			masq = append(masq, rule(m, "-j", ChainMarkMasq))
		case c.Local.set():
			masq = append(masq, rule(m, c.Local.ifNotLocal(), "-j", ChainMarkMasq))
		}
	}
	if usesCluster {
		var pre []string
		if internalChain == svc {
			pre = masq
		}
		r.chain(svc, append(pre, r.endpointRules(sp.ClusterEndpoints)...)...)
	}
	if usesLocal {
		var pre []string
		if internalChain == svl {
			pre = masq
		}
		r.chain(svl, append(pre, r.endpointRules(sp.LocalEndpoints)...)...)
	}
	if usesExternal {
		r.chain(ext, r.externalRules(externalPolicy, hasExternal, usesCluster)...)
	}
	if usesFirewall {
		r.chain(fw, r.firewallRules(ext)...)
	}
	for _, ep := range sp.ReachableEndpoints() {
		r.chain(EndpointChain(sp, ep), r.sepRules(ep)...)
	}
}

// endpointRules are a policy chain's affinity checks, then the random
// cascade: rule i of n matches with probability 1/(n-i), the last always.
func (r *portRenderer) endpointRules(eps []servicetable.Endpoint) []string {
	sp := r.sp
	var rules []string
	if sp.AffinityTimeout > 0 {
		secs := strconv.Itoa(int(sp.AffinityTimeout / time.Second))
		for _, ep := range eps {
			sep := EndpointChain(sp, ep)
			rules = append(rules, rule(comment(r.name+" -> "+ep.String()),
				"-m recent --name", sep, "--rcheck --seconds", secs, "--reap -j", sep))
		}
	}
	n := len(eps)
	for i, ep := range eps {
		words := []string{comment(r.name + " -> " + ep.String())}
		if i < n-1 {
			words = append(words, "-m statistic --mode random --probability", probability(n-i))
		}
		rules = append(rules, rule(append(words, "-j", EndpointChain(sp, ep))...))
	}
	return rules
}

// sepRules are an endpoint chain's: the hairpin masquerade (an endpoint
// reaching itself through the Service), the affinity record, the DNAT.
func (r *portRenderer) sepRules(ep servicetable.Endpoint) []string {
	c := comment(r.name)
	dnat := []string{c}
	if r.sp.AffinityTimeout > 0 {
		dnat = append(dnat, "-m recent --name", EndpointChain(r.sp, ep), "--set")
	}
	dnat = append(dnat, "-m", r.proto, "-p", r.proto, "-j DNAT --to-destination", ep.String())
	return []string{
		rule(c, "-s", ep.Addr.String(), "-j", ChainMarkMasq),
		rule(dnat...),
	}
}

// externalRules are the KUBE-EXT chain's: under the Cluster policy,
// masquerade and go to KUBE-SVC; under Local, pod and node traffic
// short-circuits to KUBE-SVC (node traffic masqueraded), the rest goes to
// KUBE-SVL when there are local endpoints.
func (r *portRenderer) externalRules(policy string, hasExternal, usesCluster bool) []string {
	svc := ClusterChain(r.sp)
	var rules []string
	if !r.sp.ExternalPolicyLocal {
		rules = append(rules, rule(comment("masquerade traffic for "+r.name+" external destinations"), "-j", ChainMarkMasq))
	} else {
		if usesCluster && r.c.Local.set() {
			rules = append(rules, rule(comment("pod traffic for "+r.name+" external destinations"),
				r.c.Local.ifLocal(), "-j", svc))
		}
		rules = append(rules, rule(comment("masquerade LOCAL traffic for "+r.name+" external destinations"),
			"-m addrtype --src-type LOCAL -j", ChainMarkMasq))
		if usesCluster {
			rules = append(rules, rule(comment("route LOCAL traffic for "+r.name+" external destinations"),
				"-m addrtype --src-type LOCAL -j", svc))
		}
	}
	if hasExternal {
		rules = append(rules, rule("-j", policy))
	}
	return rules
}

// firewallRules are the KUBE-FW chain's: traffic from a source range goes
// on to KUBE-EXT; the rest falls through undNATed and the filter table's
// KUBE-PROXY-FIREWALL drops it.
func (r *portRenderer) firewallRules(ext string) []string {
	sp := r.sp
	c := comment(r.name + " loadbalancer IP")
	var rules []string
	for _, p := range sp.SourceRanges {
		rules = append(rules, rule(c, "-s", p.String(), "-j", ext))
	}
	// The node reaching an LB IP in the ranges may carry one of its own
	// addresses as the source after a hairpin (as the nftables plane).
	if sp.LoadBalancerIPInSourceRanges() {
		rules = append(rules, rule(c, "-m addrtype --src-type LOCAL -j", ext))
	}
	return append(rules, comment("other traffic to "+r.name+" will be dropped by "+ChainProxyFirewall))
}
