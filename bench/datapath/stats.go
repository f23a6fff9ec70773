package datapathbench

import (
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

// Bootstrap intervals. A figure is a handful of runs (6 pairs per proxy,
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
