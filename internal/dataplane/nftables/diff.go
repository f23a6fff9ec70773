package nftables

import (
	"slices"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// diff appends to tx the operations that turn cur into want, in an order the
// kernel accepts within one transaction:
//
//  1. new sets, then new chains (empty);
//  2. chains whose rules differ: flush and refill (new chains: fill);
//  3. elements: removed or changed ones deleted, then new or changed ones added;
//  4. chains that are gone: all flushed first (dropping their jumps), then deleted;
//  5. sets that are gone.
//
// owned reports whether the set's definition belongs to this diff (shared maps
// appear in fragments only to carry elements; they are never created or
// deleted by a fragment diff). A nil cur or want is an empty table.
func diff(tx *nft.Tx, cur, want *nft.Table, owned func(set string) bool) {
	empty := nft.NewTable(tx.Family, tx.Table)
	if cur == nil {
		cur = empty
	}
	if want == nil {
		want = empty
	}
	for _, n := range want.SetNames() {
		if _, ok := cur.Sets[n]; !ok && owned(n) {
			tx.AddSet(want.Sets[n])
		}
	}
	wantChains := want.ChainNames()
	for _, n := range wantChains {
		if _, ok := cur.Chains[n]; !ok {
			tx.AddChain(want.Chains[n])
		}
	}
	for _, n := range wantChains {
		w := want.Chains[n]
		c, exists := cur.Chains[n]
		if exists && sameRules(tx.Family, c.Rules, w.Rules) {
			continue
		}
		if exists && len(c.Rules) > 0 {
			tx.FlushChain(n)
		}
		for _, r := range w.Rules {
			tx.AddRule(n, r)
		}
	}
	diffElements(tx, cur, want)
	var gone []string
	for _, n := range cur.ChainNames() {
		if _, ok := want.Chains[n]; !ok {
			gone = append(gone, n)
		}
	}
	for _, n := range gone {
		if len(cur.Chains[n].Rules) > 0 {
			tx.FlushChain(n)
		}
	}
	for _, n := range gone {
		tx.DeleteChain(n)
	}
	for _, n := range cur.SetNames() {
		if _, ok := want.Sets[n]; !ok && owned(n) {
			tx.DeleteSet(n)
		}
	}
}

func diffElements(tx *nft.Tx, cur, want *nft.Table) {
	names := cur.SetNames()
	for _, n := range want.SetNames() {
		if _, ok := cur.Sets[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	type change struct {
		set      string
		del, add []nft.Element
	}
	var changes []change
	for _, n := range names {
		c, w := cur.Sets[n], want.Sets[n]
		if (c != nil && c.Timeout > 0) || (w != nil && w.Timeout > 0) {
			continue // dynamic sets: the data path owns their elements
		}
		var ch change
		ch.set = n
		// Collect the differing keys by map lookups and sort only those:
		// sorting every key of a 10k-element map on each sync would cost more
		// than the rest of a partial sync.
		var del, add []string
		if c != nil {
			for k, ce := range c.Elements {
				if w == nil {
					del = append(del, k)
				} else if we, ok := w.Elements[k]; !ok || !sameVerdict(ce.Verdict, we.Verdict) {
					del = append(del, k)
				}
			}
		}
		if w != nil {
			for k, we := range w.Elements {
				if c == nil {
					add = append(add, k)
				} else if ce, ok := c.Elements[k]; !ok || !sameVerdict(ce.Verdict, we.Verdict) {
					add = append(add, k)
				}
			}
		}
		slices.Sort(del)
		slices.Sort(add)
		for _, k := range del {
			ch.del = append(ch.del, c.Elements[k])
		}
		for _, k := range add {
			ch.add = append(ch.add, w.Elements[k])
		}
		changes = append(changes, ch)
	}
	for _, ch := range changes {
		tx.DeleteElements(ch.set, ch.del...)
	}
	for _, ch := range changes {
		tx.AddElements(ch.set, ch.add...)
	}
}

func sameVerdict(a, b *nft.Verdict) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameRules(f ipfamily.Family, a, b []*nft.Rule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		if a[i].Comment != b[i].Comment || a[i].Render(f) != b[i].Render(f) {
			return false
		}
	}
	return true
}
