package nftables

import (
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// change is one Service port entry to program anew: old is the entry
// programmed (nil: a new one), sp the one to program (nil: it is gone).
type change struct {
	id  string
	old *servicetable.ServicePort
	sp  *servicetable.ServicePort
}

// walkChanges compares ports, all of the family's entries, with what fs
// programmed: O(entries) lookups by pointer. It returns the changes sorted
// by ID and the number of entries ports holds.
func (fs *familyState) walkChanges(ports []*servicetable.ServicePort) ([]change, int) {
	var changes []change
	kept := 0 // programmed IDs still in ports
	for _, sp := range ports {
		if _, ok := fs.live[sp]; ok {
			kept++
			continue
		}
		old := fs.ports[sp.ID]
		if old != nil {
			kept++
		}
		changes = append(changes, change{id: sp.ID, old: old, sp: sp})
	}
	if kept < len(fs.ports) {
		still := make(map[string]bool, len(ports))
		for _, sp := range ports {
			still[sp.ID] = true
		}
		for id, old := range fs.ports {
			if !still[id] {
				changes = append(changes, change{id: id, old: old})
			}
		}
		slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.id, b.id) })
	}
	return changes, len(ports)
}

// deltaChanges returns the changes of family f from t's Delta, sorted by ID,
// and the number of entries t holds for f, when the Delta follows the table
// fs programmed last and agrees with it (every entry it removes is
// programmed, every ID it adds free or freed): O(changed entries).
// Otherwise ok is false and the caller compares every entry.
func (fs *familyState) deltaChanges(t *servicetable.Table, f ipfamily.Family) (changes []change, count int, ok bool) {
	d := t.DeltaFrom(fs.seq)
	if d == nil {
		return nil, 0, false
	}
	removed, added := ofFamily(d.Removed, f), ofFamily(d.Added, f)
	count = len(fs.ports) - len(removed) + len(added)
	for len(removed) > 0 || len(added) > 0 {
		var c change
		switch {
		case len(added) == 0 || len(removed) > 0 && removed[0].ID < added[0].ID:
			c = change{id: removed[0].ID, old: removed[0]}
			removed = removed[1:]
		case len(removed) == 0 || added[0].ID < removed[0].ID:
			c = change{id: added[0].ID, sp: added[0]}
			added = added[1:]
		default:
			c = change{id: added[0].ID, old: removed[0], sp: added[0]}
			removed, added = removed[1:], added[1:]
		}
		if fs.ports[c.id] != c.old {
			return nil, 0, false
		}
		changes = append(changes, c)
	}
	return changes, count, true
}

// ofFamily returns the entries of family f among ports, in ports' order.
func ofFamily(ports []*servicetable.ServicePort, f ipfamily.Family) []*servicetable.ServicePort {
	var out []*servicetable.ServicePort
	for _, sp := range ports {
		if familyOf(sp) == f {
			out = append(out, sp)
		}
	}
	return out
}
