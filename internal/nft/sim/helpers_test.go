package sim

import (
	"fmt"
	"math/big"
	"net/netip"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// cmpOpts compares addresses and exact probabilities by value.
var cmpOpts = cmp.Options{
	cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{}, netip.Prefix{}),
	cmp.Comparer(func(a, b *big.Rat) bool { return a.Cmp(b) == 0 }),
}

// renderTrace prints a trace one step a line, for failure messages and
// golden comparisons.
func renderTrace(steps []Step) string {
	var b []byte
	for _, s := range steps {
		line := fmt.Sprintf("%-11s ", s.Hook)
		if s.Chain != "" {
			line += s.Table + "/" + s.Chain
			if s.Rule >= 0 {
				line += fmt.Sprintf("[%d]", s.Rule)
			}
			line += " "
		}
		line += s.Action.String()
		if s.Target != "" {
			line += " " + s.Target
		}
		if s.Detail != "" {
			line += ": " + s.Detail
		}
		b = append(b, line...)
		b = append(b, '\n')
	}
	return string(b)
}

// table builds a table directly (no fake kernel) from chains and sets.
func table(f ipfamily.Family, name string, chains []*nft.Chain, sets ...*nft.Set) *nft.Table {
	t := nft.NewTable(f, name)
	for _, c := range chains {
		t.Chains[c.Name] = c
	}
	for _, s := range sets {
		if s.Elements == nil {
			s.Elements = map[string]nft.Element{}
		}
		t.Sets[s.Name] = s
	}
	return t
}

// base returns a base chain.
func base(name, typ, hook string, prio int, rules ...*nft.Rule) *nft.Chain {
	return &nft.Chain{Name: name, Hook: &nft.Hook{Type: typ, Hook: hook, Priority: prio}, Rules: rules}
}

// regular returns a regular chain.
func regular(name string, rules ...*nft.Rule) *nft.Chain {
	return &nft.Chain{Name: name, Rules: rules}
}

// probs returns each outcome's final destination and probability.
func probs(outs []Outcome) map[string]string {
	m := map[string]string{}
	for _, o := range outs {
		m[o.Result.Final.Dst.String()] = o.Probability.RatString()
	}
	return m
}
