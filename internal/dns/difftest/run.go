package difftest

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Compare sends every query to CoreDNS at coreAddr and svcnet at svcnetAddr (one
// after the other, the same message to both) and returns one Result per query,
// in order. A query that gets no response from either server (after the
// Exchanger's tries) is an error naming it: a lost answer is not a difference.
func Compare(ctx context.Context, queries []Query, coreAddr, svcnetAddr string) ([]Result, error) {
	x := Exchanger{}
	out := make([]Result, 0, len(queries))
	for _, q := range queries {
		a, err := x.Exchange(ctx, coreAddr, q)
		if err != nil {
			return out, fmt.Errorf("coredns: %w", err)
		}
		b, err := x.Exchange(ctx, svcnetAddr, q)
		if err != nil {
			return out, fmt.Errorf("svcnet: %w", err)
		}
		r := Result{Query: q, CoreDNS: Canonicalize(a), Svcnet: Canonicalize(b)}
		r.Fields = Diff(r.CoreDNS, r.Svcnet)
		out = append(out, r)
	}
	return out, nil
}

// Summary is the run's summary: the counts, then the count per known
// difference, largest first.
func (v Verdict) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d queries, %d equal, %d known differences, %d unlisted differences, %d stale entries\n",
		v.Queries, v.Equal, v.KnownTotal(), len(v.Unlisted), len(v.Stale))
	titles := make([]string, 0, len(v.Known))
	for t := range v.Known {
		titles = append(titles, t)
	}
	sort.Slice(titles, func(i, j int) bool {
		if v.Known[titles[i]] != v.Known[titles[j]] {
			return v.Known[titles[i]] > v.Known[titles[j]]
		}
		return titles[i] < titles[j]
	})
	for _, t := range titles {
		fmt.Fprintf(&b, "  %5d  %s\n", v.Known[t], t)
	}
	return b.String()
}
