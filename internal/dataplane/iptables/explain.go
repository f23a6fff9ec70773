package iptables

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Rules is the iptables plane as the tracer sees it (dataplane.Explainer):
// the nat and filter tables Sync programs for Families (both when empty),
// translated into nf_tables tables (Translate), and which tables of a
// read-back are the plane's: iptables-nft keeps them as nf_tables tables
// "nat" and "filter" of families ip and ip6, which is what the kernel's
// trace events name.
type Rules struct{ Families []ipfamily.Family }

var _ dataplane.Explainer = Rules{}

// Render translates each family's rendered ruleset with the Jumps from the
// built-in chains (RenderTables).
func (r Rules) Render(t *servicetable.Table) ([]*nft.Table, error) {
	var out []*nft.Table
	for _, f := range families(r.Families) {
		tables, err := Translate(f, RenderTables(Render(t, f)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, tables...)
	}
	return out, nil
}

// Owns reports whether a table of this name is one this plane programs.
func (Rules) Owns(table string) bool { return slices.Contains(TranslatedTables, table) }

func families(fs []ipfamily.Family) []ipfamily.Family {
	if len(fs) == 0 {
		return ipfamily.All
	}
	return fs
}

// RenderTables returns the ruleset as the kernel holds it after Sync: every
// chain of both tables, and the built-in chains that Jumps prepends to, each
// with its jumps (the last of a chain's Jumps first), policy ACCEPT.
func RenderTables(rs *Ruleset) map[string]*ipt.Table {
	out := map[string]*ipt.Table{}
	for _, name := range TranslatedTables {
		t := &ipt.Table{Name: name, Chains: map[string]*ipt.Chain{}}
		for n, c := range rs.Chains(name) {
			t.Chains[n] = &ipt.Chain{Name: n, Policy: "-", Rules: slices.Clone(c.Rules)}
		}
		for _, j := range Jumps {
			if j.Table != name {
				continue
			}
			c := t.Chains[j.From]
			if c == nil {
				c = &ipt.Chain{Name: j.From, Policy: "ACCEPT"}
				t.Chains[j.From] = c
			}
			c.Rules = slices.Insert(c.Rules, 0, j.Rule)
		}
		out[name] = t
	}
	return out
}

// ReadKernel reads the plane's tables of each family (both when none is
// given) back with run's iptables-save (of the variant the node uses, in
// its network namespace) and translates them. A family whose tables hold
// no chain is left out.
func ReadKernel(ctx context.Context, run ipt.Runner, fs ...ipfamily.Family) ([]*nft.Table, error) {
	var out []*nft.Table
	for _, f := range families(fs) {
		tables := map[string]*ipt.Table{}
		for _, name := range TranslatedTables {
			saved, err := run.Save(ctx, f, name)
			if err != nil {
				return nil, err
			}
			parsed, err := ipt.ParseSave(saved)
			if err != nil {
				return nil, fmt.Errorf("%s table %s: %w", f, name, err)
			}
			if t := parsed[name]; t != nil && len(t.Chains) > 0 {
				tables[name] = t
			}
		}
		got, err := Translate(f, tables)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// ServiceOf names what a rule of this plane's chain is about, for the
// tracer: the kind of the per-Service-port chain ("service" for KUBE-SVC,
// "local" KUBE-SVL, "external" KUBE-EXT, "firewall" KUBE-FW and the filter
// table's KUBE-PROXY-FIREWALL, "endpoint" KUBE-SEP) and the Service port its
// comment names (kube-proxy's "ns/name:port", the first word of the comment
// with a slash). ok is false for other chains, or a rule without such a
// comment.
func ServiceOf(chain, source string) (kind, service string, ok bool) {
	switch {
	case strings.HasPrefix(chain, prefixCluster):
		kind = "service"
	case strings.HasPrefix(chain, prefixLocal):
		kind = "local"
	case strings.HasPrefix(chain, prefixExternal):
		kind = "external"
	case strings.HasPrefix(chain, prefixFirewall), chain == ChainProxyFirewall:
		kind = "firewall"
	case strings.HasPrefix(chain, prefixEndpoint):
		kind = "endpoint"
	default:
		return "", "", false
	}
	w, err := Words(source)
	if err != nil {
		return "", "", false
	}
	for i := 0; i+1 < len(w); i++ {
		if w[i] != "--comment" {
			continue
		}
		for _, word := range strings.Fields(w[i+1]) {
			if strings.Contains(word, "/") {
				return kind, word, true
			}
		}
	}
	return "", "", false
}
