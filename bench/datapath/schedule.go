package datapathbench

import (
	"fmt"
	"slices"
	"time"
)

// slot is one proxy's turn in one round at one Service count: the proxy runs
// on both nodes and every path is measured once (direct, then Service).
type slot struct {
	count int // index into the counts
	round int // 1-based, within the count
	proxy string
}

// schedule returns the slots of the whole run in order: for each count its
// rounds, and in each round every proxy once, in proxies' order in the
// run's odd rounds (counted over all counts, 1-based) and reversed in even
// ones (A B C, C B A, A B C, ...). The serpentine order balances a drift of
// the machine over time between the proxies (each proxy's mean position in a
// count is about the same), and the proxy that ends a round begins the
// next, so each round boundary saves a swap.
func schedule(proxies []string, counts, rounds int) []slot {
	var out []slot
	n := 0
	for c := range counts {
		for r := 1; r <= rounds; r++ {
			order := slices.Clone(proxies)
			if n%2 == 1 {
				slices.Reverse(order)
			}
			n++
			for _, p := range order {
				out = append(out, slot{count: c, round: r, proxy: p})
			}
		}
	}
	return out
}

// swaps counts the proxy changes the slots need, the lab starting with the
// first slot's proxy.
func swaps(slots []slot) int {
	n := 0
	for i := 1; i < len(slots); i++ {
		if slots[i].proxy != slots[i-1].proxy {
			n++
		}
	}
	return n
}

// measureShare is the part of the run's bound that the measured load itself
// may take; the rest is for the lab, the fillers and the swaps.
const measureShare = 0.5

// checkBudget fails when the load of slots would take more than measureShare
// of limit: in each slot, paths paths, each pairs pairs of runs (direct and
// Service), each run a keep-alive and a new-connection load of d and a
// connect probe of d/2.
func checkBudget(slots, paths, pairs int, d, limit time.Duration) error {
	load := time.Duration(slots*paths*pairs*2) * (2*d + d/2)
	if float64(load) > measureShare*float64(limit) {
		return fmt.Errorf("%d slots x %d paths x %d pairs x 2 runs x %s = %s of load: over %.0f%% of the run's bound %s; shorten the duration or the counts",
			slots, paths, pairs, 2*d+d/2, load, measureShare*100, limit)
	}
	return nil
}
