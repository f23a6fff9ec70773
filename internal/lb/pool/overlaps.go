package pool

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/svcnet/svcnet/internal/lb/alloc"
)

// Overlaps reports every pair of pools that share an address: for each pair, the
// later one by name gets an *Error (wrapping ErrOverlap, Other set to the earlier
// one) naming both pools and the shared addresses. A pool that overlaps several
// earlier pools gets one error per pool. The result is sorted by pool, then by the
// other pool; nil when nothing overlaps. Callers leave out every reported pool.
func Overlaps(pools []alloc.Pool) []error {
	sorted := make([]*alloc.Pool, len(pools))
	for i := range pools {
		sorted[i] = &pools[i]
	}
	slices.SortStableFunc(sorted, func(a, b *alloc.Pool) int { return cmp.Compare(a.Name, b.Name) })
	var errs []error
	for j, later := range sorted {
		for _, earlier := range sorted[:j] {
			if shared, ok := firstOverlap(later, earlier); ok {
				errs = append(errs, &Error{Pool: later.Name, Other: earlier.Name, Problems: []string{
					fmt.Sprintf("spec.addresses: %s overlaps IPAddressPool %s", shared, earlier.Name)}})
			}
		}
	}
	return errs
}

// firstOverlap returns the first range of addresses a and b share, in a's order.
func firstOverlap(a, b *alloc.Pool) (alloc.Range, bool) {
	for _, x := range a.Ranges {
		for _, y := range b.Ranges {
			if x.Overlaps(y) {
				first, last := x.First, x.Last
				if y.First.Compare(first) > 0 {
					first = y.First
				}
				if y.Last.Compare(last) < 0 {
					last = y.Last
				}
				return alloc.Range{First: first, Last: last}, true
			}
		}
	}
	return alloc.Range{}, false
}
