package alloc

import (
	"cmp"
	"math"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// allows reports whether the pool's namespace and label constraints admit s.
func (p *Pool) allows(s *Service) bool {
	if len(p.Namespaces) > 0 && !slices.Contains(p.Namespaces, s.Key.Namespace) {
		return false
	}
	if len(p.NamespaceSelectors) > 0 && !anyMatches(p.NamespaceSelectors, s.NamespaceLabels) {
		return false
	}
	if len(p.ServiceSelectors) > 0 && !anyMatches(p.ServiceSelectors, s.Labels) {
		return false
	}
	return true
}

func anyMatches(sels []labels.Selector, set map[string]string) bool {
	for _, sel := range sels {
		if sel != nil && sel.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}

// rank is the auto-assignment order key of a priority: 0 (unset) sorts last.
func rank(priority int) int {
	if priority == 0 {
		return math.MaxInt
	}
	return priority
}

// autoOrder sorts pools for auto-assignment: by priority (0 last), then name.
func autoOrder(a, b *Pool) int {
	if c := cmp.Compare(rank(a.Priority), rank(b.Priority)); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// hasFamily reports whether the pool has a range of the family (v4 true: IPv4).
func (p *Pool) hasFamily(v4 bool) bool {
	for _, r := range p.Ranges {
		if r.First.Is4() == v4 {
			return true
		}
	}
	return false
}

// holds reports whether one of the pool's ranges contains a.
func (p *Pool) holds(a netip.Addr) bool {
	for _, r := range p.Ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// excluded returns the excluded block of the pool that holds a, if any.
func (p *Pool) excluded(a netip.Addr) (Reserved, bool) {
	for _, ex := range p.Excluded {
		if ex.Range.Contains(a) {
			return ex, true
		}
	}
	return Reserved{}, false
}
