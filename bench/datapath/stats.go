package datapathbench

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// quantile returns the q-quantile (0 <= q <= 1, nearest rank) of ds, which it
// does not modify; 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// median returns the median of xs (the mean of the middle two for an even
// count), which it does not modify; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio returns a/b, or 0 when b is 0 (nothing to compare with).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Bootstrap intervals. A figure is a handful of runs (9 pairs per proxy,
// path and count by default) on a shared 2-core machine whose runs swing by
// 5%; an interval says how far its median could move by chance, so a
// comparison can tell a difference from the noise.
const (
	bootstrapResamples = 2000
	bootstrapLevel     = 0.90 // two-sided: the 5th to the 95th percentile
)

// medianCI returns the percentile-bootstrap interval of the median of xs at
// bootstrapLevel. The resampling is seeded, so a report is reproducible from
// its samples. It returns (0, 0) for no samples.
func medianCI(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	r := rand.New(rand.NewPCG(1, uint64(len(xs))))
	meds := make([]float64, bootstrapResamples)
	buf := make([]float64, len(xs))
	for i := range meds {
		for j := range buf {
			buf[j] = xs[r.IntN(len(xs))]
		}
		meds[i] = median(buf)
	}
	return interval(meds)
}

// diffCI returns the percentile-bootstrap interval of median(a) - median(b)
// at bootstrapLevel, a and b resampled independently (seeded). It returns
// (0, 0) when either has no samples.
func diffCI(a, b []float64) (lo, hi float64) {
	if len(a) == 0 || len(b) == 0 {
		return 0, 0
	}
	r := rand.New(rand.NewPCG(2, uint64(len(a)<<16|len(b))))
	ds := make([]float64, bootstrapResamples)
	ba, bb := make([]float64, len(a)), make([]float64, len(b))
	for i := range ds {
		for j := range ba {
			ba[j] = a[r.IntN(len(a))]
		}
		for j := range bb {
			bb[j] = b[r.IntN(len(b))]
		}
		ds[i] = median(ba) - median(bb)
	}
	return interval(ds)
}

// interval returns the (1-bootstrapLevel)/2 and (1+bootstrapLevel)/2
// quantiles of xs (sorted in place).
func interval(xs []float64) (lo, hi float64) {
	slices.Sort(xs)
	at := func(q float64) float64 {
		i := int(q * float64(len(xs)-1))
		return xs[max(0, min(i, len(xs)-1))]
	}
	return at((1 - bootstrapLevel) / 2), at((1 + bootstrapLevel) / 2)
}

// Rank-sum tests. Two proxies' runs of one figure are two small groups (9
// pair ratios or run quantiles each by default). Under "the proxies are equal"
// every split of the pooled runs into groups of those sizes is as likely as
// the one measured, so the share of splits whose statistic is at least as
// extreme as the measured one is an exact p-value (a permutation test). The
// statistic is the sum of a's ranks in the pooled runs (Wilcoxon-Mann-
// Whitney; tied runs share their mean rank): a run that a burst hit counts
// as one rank, not by how far it fell, and groups wholly apart get the
// smallest p-value there is, 1/48620 for 9 and 9 (a difference of medians
// ties between many splits and could not).
const (
	permutationExact = 20    // pooled runs up to this many: enumerate every split
	permutationDraws = 20000 // more: this many seeded random splits
)

// rankSumP returns the one-sided p-values of a's rank sum: low is the share
// of splits with a rank sum at most a's (small when a's runs are below b's),
// high the share with one at least a's. Both are 1 when either group is
// empty.
func rankSumP(a, b []float64) (low, high float64) {
	if len(a) == 0 || len(b) == 0 {
		return 1, 1
	}
	rk := ranks(append(slices.Clone(a), b...))
	n := len(rk)
	var w float64
	for _, r := range rk[:len(a)] {
		w += r
	}
	if n <= permutationExact {
		le, ge, all := splitCounts(rk, len(a), w)
		return float64(le) / float64(all), float64(ge) / float64(all)
	}
	const eps = 1e-9
	var le, ge, all int
	count := func(wi float64) {
		all++
		if wi <= w+eps {
			le++
		}
		if wi >= w-eps {
			ge++
		}
	}
	r := rand.New(rand.NewPCG(3, uint64(len(a)<<16|len(b))))
	count(w) // the measured split is one of them
	perm := make([]float64, n)
	for range permutationDraws {
		copy(perm, rk)
		r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		var wi float64
		for _, x := range perm[:len(a)] {
			wi += x
		}
		count(wi)
	}
	return float64(le) / float64(all), float64(ge) / float64(all)
}

// splitCounts counts the splits of the pooled ranks rk into a group of k and
// the rest: all of them, and those whose group's rank sum is at most (le)
// and at least (ge) w. It counts them by rank sum rather than one by one:
// ways[j][s] is the number of j-element subsets of the ranks seen so far
// whose rank sum is s/2 (ranks are whole or, tied, halves: doubled, they
// are whole numbers), which takes n·k·n(n+1) steps where enumerating the
// splits takes C(n, k)·k (for 9 and 9: 55404 against 437580).
func splitCounts(rk []float64, k int, w float64) (le, ge, all int64) {
	n := len(rk)
	top := n * (n + 1) // twice the largest rank sum
	ways := make([][]int64, k+1)
	for j := range ways {
		ways[j] = make([]int64, top+1)
	}
	ways[0][0] = 1
	for i, r := range rk {
		d := int(math.Round(2 * r))
		for j := min(i+1, k); j >= 1; j-- {
			for s := top; s >= d; s-- {
				ways[j][s] += ways[j-1][s-d]
			}
		}
	}
	w2 := int(math.Round(2 * w))
	for s, c := range ways[k] {
		all += c
		if s <= w2 {
			le += c
		}
		if s >= w2 {
			ge += c
		}
	}
	return le, ge, all
}

// ranks returns the rank (1-based) of each of xs in xs, ties sharing the
// mean of their ranks.
func ranks(xs []float64) []float64 {
	idx := argsort(xs)
	out := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && xs[idx[j+1]] == xs[idx[i]] {
			j++
		}
		mean := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			out[idx[k]] = mean
		}
		i = j + 1
	}
	return out
}

// holm returns which of the p-values Holm's step-down procedure rejects at
// family-wise level alpha: the k-th smallest (from 0) is rejected when it and
// every smaller one are at most alpha/(len(ps)-k). The chance that it rejects
// any true "no difference" is at most alpha, however many p-values there are;
// testing each at alpha alone would reject about alpha*len(ps) of them.
func holm(ps []float64, alpha float64) []bool {
	idx := argsort(ps)
	out := make([]bool, len(ps))
	for k, i := range idx {
		if ps[i] > alpha/float64(len(ps)-k) {
			break
		}
		out[i] = true
	}
	return out
}

// argsort returns the indices of xs in ascending order of their values, ties
// in index order.
func argsort(xs []float64) []int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int { return cmp.Compare(xs[x], xs[y]) })
	return idx
}
