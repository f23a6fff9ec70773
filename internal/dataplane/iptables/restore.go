package iptables

import (
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Chains returns every chain of table (TableFilter or TableNAT) keyed by
// name: the shared chains with the rules of every Service port in order,
// and, in the nat table, each port's own chains.
func (rs *Ruleset) Chains(table string) map[string]*Chain {
	out := map[string]*Chain{}
	for _, c := range rs.fixedChains(table) {
		out[c.Name] = c
	}
	if table == TableNAT {
		for _, p := range rs.Ports {
			for _, c := range p.Chains {
				out[c.Name] = c
			}
		}
	}
	return out
}

// fixedChains returns table's shared chains, in kube-proxy's declaration
// order, with their rules: the fixed ones and every port's.
func (rs *Ruleset) fixedChains(table string) []*Chain {
	if cs, ok := rs.fixed[table]; ok {
		return cs
	}
	cs := rs.renderFixed(table)
	if rs.fixed == nil {
		rs.fixed = map[string][]*Chain{}
	}
	rs.fixed[table] = cs
	return cs
}

// renderFixed renders table's shared chains (fixedChains).
func (rs *Ruleset) renderFixed(table string) []*Chain {
	collect := func(s shared) []string {
		var rules []string
		for _, p := range rs.Ports {
			rules = append(rules, p.shared[s]...)
		}
		return rules
	}
	// The dispatch chains by port, each port's rules together, in the
	// descending order of the port's chain hash (byHashDescending).
	dispatch := func(s shared) []string {
		var rules []string
		for _, p := range rs.byHashDescending() {
			rules = append(rules, p.shared[s]...)
		}
		return rules
	}
	c := rs.cfg
	mark := c.mark()
	if table == TableFilter {
		return canonicalChains(c.Family, []*Chain{
			{Name: ChainServices, Rules: collect(filterServices)},
			{Name: ChainExternalServices, Rules: collect(filterExternal)},
			{Name: ChainForward, Rules: []string{
				// Conntrack-INVALID packets would reach pods un-DNATed and
				// reset connections (kubernetes#74839).
				"-m conntrack --ctstate INVALID -j DROP",
				rule(comment("kubernetes forwarding rules"), "-m mark --mark", mark+"/"+mark, "-j ACCEPT"),
				rule(comment("kubernetes forwarding conntrack rule"), "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"),
			}},
			{Name: ChainNodePorts, Rules: collect(filterNodePorts)},
			{Name: ChainProxyFirewall, Rules: collect(filterFirewall)},
		})
	}
	services := dispatch(natServices)
	// NodePort dispatch comes last: a NodePort on a node address must not
	// shadow an external IP or LB IP that is also a node address.
	var tail []string
	for _, a := range c.NodePortAddrs {
		tail = append(tail, rule(comment("kubernetes service nodeports; NOTE: this must be the last rule in this chain"),
			"-d", a.String(), "-j", ChainNodePorts))
	}
	canonical(c.Family, tail)
	services = append(services, tail...)
	return canonicalChains(c.Family, []*Chain{
		{Name: ChainServices, Rules: services},
		{Name: ChainNodePorts, Rules: dispatch(natNodePorts)},
		{Name: ChainPostrouting, Rules: []string{
			rule("-m mark ! --mark", mark+"/"+mark, "-j RETURN"),
			rule("-j MARK --xor-mark", mark),
			rule(comment("kubernetes service traffic requiring SNAT"), "-j MASQUERADE --random-fully"),
		}},
		{Name: ChainMarkMasq, Rules: []string{rule("-j MARK --or-mark", mark)}},
		{Name: ChainEgressMasq, Rules: egressRules(c.Egress)},
	})
}

// canonicalChains writes the fixed rules of chains in iptables-save's form
// (the per-port rules, all of KUBE-SERVICES and KUBE-NODEPORTS, already
// are) and returns chains.
func canonicalChains(f ipfamily.Family, chains []*Chain) []*Chain {
	for _, c := range chains {
		if c.Name != ChainServices && c.Name != ChainNodePorts {
			canonical(f, c.Rules)
		}
	}
	return chains
}

// byHashDescending returns the ports in the descending order of the hash
// their chains are named by (KUBE-SVC-<hash>, KUBE-EXT-<hash>, ...): the
// order of the dispatch rules in KUBE-SERVICES and KUBE-NODEPORTS, each
// port's rules together (a packet to an LB IP meets the rules of half the
// ports on average, as in kube-proxy's order by Service name; each rule
// matches its own destination and port, so the order changes nothing
// else). iptables-nft-restore (1.8.9) keeps the chains a restore names in a
// list sorted ascending that it searches from the start for every name of
// every line (the cache request's chain list), so jump targets named in
// descending order cost it one comparison each: restoring KUBE-SERVICES of
// 10,000 frontends took 0.82 s here in ascending order, 0.29 s in
// descending (BenchmarkKernelRestoreOrder).
func (rs *Ruleset) byHashDescending() []*Port {
	out := slices.Clone(rs.Ports)
	slices.SortStableFunc(out, func(a, b *Port) int { return strings.Compare(b.hash, a.hash) })
	return out
}

// Full returns the iptables-restore input that makes both tables' chains of
// this plane equal to rs; run with --noflush, it leaves other chains alone.
func (rs *Ruleset) Full() string {
	return rs.restore(nil, nil, nil)
}

// Partial returns the iptables-restore input (for --noflush) that brings a
// kernel holding an earlier ruleset to rs: the filter table's chains and
// the nat table's shared chains whole, the chains of the ports whose ID is
// in changed, and the removal of the chains in stale (see Stale). Chains of
// unchanged ports are left as they are.
func (rs *Ruleset) Partial(changed map[string]bool, stale []string) string {
	if changed == nil {
		changed = map[string]bool{}
	}
	return rs.restore(changed, stale, nil)
}

// PartialSince is Partial for a kernel that holds prev exactly: shared
// chains whose rules are the same as prev's are not rewritten either (a
// change of endpoints then writes the Service port's own chains only, not
// KUBE-SERVICES with a rule per frontend). "" when nothing differs.
func (rs *Ruleset) PartialSince(prev *Ruleset, changed map[string]bool, stale []string) string {
	if changed == nil {
		changed = map[string]bool{}
	}
	return rs.restore(changed, stale, prev)
}

// Stale returns the names of the per-port chains of prev that rs no longer
// has, sorted.
func (rs *Ruleset) Stale(prev *Ruleset) []string {
	have := map[string]bool{}
	for _, p := range rs.Ports {
		for _, c := range p.Chains {
			have[c.Name] = true
		}
	}
	var out []string
	for _, p := range prev.Ports {
		for _, c := range p.Chains {
			if !have[c.Name] {
				out = append(out, c.Name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// restore writes the input; changed == nil means every port; with prev,
// shared chains equal to prev's are left out, and those with a few rules
// changed are edited in place (editLines). Each table's chains are
// declared before any rule, so rules may jump to chains of the same
// restore.
func (rs *Ruleset) restore(changed map[string]bool, stale []string, prev *Ruleset) string {
	var b strings.Builder
	fixed := func(table string) ([]*Chain, []string) {
		cs := rs.fixedChains(table)
		if prev == nil {
			return cs, nil
		}
		old := map[string]*Chain{}
		for _, c := range prev.fixedChains(table) {
			old[c.Name] = c
		}
		var whole []*Chain
		var edits []string
		for _, c := range cs {
			o := old[c.Name]
			if o != nil && slices.Equal(o.Rules, c.Rules) {
				continue
			}
			if o != nil {
				if lines, ok := editLines(c.Name, o.Rules, c.Rules); ok {
					edits = append(edits, lines...)
					continue
				}
			}
			whole = append(whole, c)
		}
		return whole, edits
	}
	if f, edits := fixed(TableFilter); prev == nil || len(f) > 0 || len(edits) > 0 {
		writeTableEdits(&b, TableFilter, f, edits, nil)
	}
	nat, edits := fixed(TableNAT)
	for _, p := range rs.Ports {
		if changed == nil || changed[p.ID] {
			nat = append(nat, p.Chains...)
		}
	}
	if prev == nil || len(nat) > 0 || len(edits) > 0 || len(stale) > 0 {
		writeTableEdits(&b, TableNAT, nat, edits, stale)
	}
	return b.String()
}

// Jump is a rule in a built-in chain that sends traffic to one of this
// plane's chains; the backend ensures each exists (kube-proxy's
// iptablesJumpChains), outside the restore, which must not flush built-in
// chains: as kube-proxy, it prepends each missing one (-I) in the order of
// Jumps, so the last of a built-in chain's jumps comes first.
type Jump struct {
	Table string
	// From is the built-in chain, To this plane's chain.
	From, To string
	// Rule is the rule's text after "-A <From> ".
	Rule string
}

// Jumps are the jumps from the built-in chains, as kube-proxy's.
var Jumps = []Jump{
	jump(TableFilter, "INPUT", ChainExternalServices, "kubernetes externally-visible service portals", true),
	jump(TableFilter, "FORWARD", ChainExternalServices, "kubernetes externally-visible service portals", true),
	jump(TableFilter, "INPUT", ChainNodePorts, "kubernetes health check service ports", false),
	jump(TableFilter, "FORWARD", ChainServices, "kubernetes service portals", true),
	jump(TableFilter, "OUTPUT", ChainServices, "kubernetes service portals", true),
	jump(TableFilter, "FORWARD", ChainForward, "kubernetes forwarding rules", false),
	jump(TableFilter, "INPUT", ChainProxyFirewall, "kubernetes load balancer firewall", true),
	jump(TableFilter, "OUTPUT", ChainProxyFirewall, "kubernetes load balancer firewall", true),
	jump(TableFilter, "FORWARD", ChainProxyFirewall, "kubernetes load balancer firewall", true),
	jump(TableNAT, "OUTPUT", ChainServices, "kubernetes service portals", false),
	jump(TableNAT, "PREROUTING", ChainServices, "kubernetes service portals", false),
	// Prepended before the next one: the egress masquerade comes after
	// KUBE-POSTROUTING in POSTROUTING.
	jump(TableNAT, "POSTROUTING", ChainEgressMasq, "svcnet egress masquerade of pod traffic leaving the cluster", false),
	jump(TableNAT, "POSTROUTING", ChainPostrouting, "kubernetes postrouting rules", false),
}

func jump(table, from, to, why string, newOnly bool) Jump {
	r := rule(comment(why), "-j", to)
	if newOnly {
		r = rule("-m conntrack --ctstate NEW", r)
	}
	return Jump{Table: table, From: from, To: to, Rule: r}
}
