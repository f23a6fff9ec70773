package maglev

import (
	"fmt"
	"slices"
	"testing"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.%d.%d.%d:8080", i/65536, i/256%256, i%256)
	}
	return out
}

// moved is the share of the table's slots whose backend changes when
// backend r of bes leaves: its own slots and any other that moved.
func moved(t testing.TB, bes []string, r, m int) float64 {
	before, err := Table(bes, m)
	if err != nil {
		t.Fatal(err)
	}
	rest := append(append([]string{}, bes[:r]...), bes[r+1:]...)
	after, err := Table(rest, m)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range before {
		if bes[before[i]] != rest[after[i]] {
			n++
		}
	}
	return float64(n) / float64(m)
}

// TestTable: every slot has a backend, every backend has ⌊M/N⌋ or ⌈M/N⌉
// slots (the backends take turns), the same names give the same table, and
// a removed backend's slots all move while few others do.
func TestTable(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 100} {
		bes := names(n)
		tab, err := Table(bes, SizeDefault)
		if err != nil {
			t.Fatal(err)
		}
		count := make([]int, n)
		for _, b := range tab {
			count[b]++
		}
		lo, hi := SizeDefault/n, (SizeDefault+n-1)/n
		for i, c := range count {
			if c < lo || c > hi {
				t.Errorf("N=%d: backend %d has %d slots, want %d..%d", n, i, c, lo, hi)
			}
		}
		again, _ := Table(names(n), SizeDefault)
		if !slices.Equal(tab, again) {
			t.Errorf("N=%d: two tables of the same backends differ", n)
		}
		if n > 1 {
			if f := moved(t, bes, n/2, SizeDefault); f < float64(lo)/SizeDefault || f > 3/float64(n) {
				t.Errorf("N=%d: %.4f of the flows moved when one backend left, want 1/N..3/N", n, f)
			}
		}
	}
	for _, bad := range []struct {
		n, m int
	}{{0, SizeDefault}, {3, 3}, {3, 16380}} {
		if _, err := Table(names(bad.n), bad.m); err == nil {
			t.Errorf("Table(%d backends, M=%d): no error", bad.n, bad.m)
		}
	}
}

// BenchmarkDisruption reports the share of flows that change backend when
// one of N backends leaves (the mean over up to 10 choices of which), as a
// multiple of 1/N (the removed backend's own share, which must move): 1.0
// is the least possible.
func BenchmarkDisruption(b *testing.B) {
	for _, m := range []int{SizeDefault, SizeLarge} {
		for _, n := range []int{3, 10, 20, 50, 100, 1000} {
			b.Run(fmt.Sprintf("M=%d/N=%d", m, n), func(b *testing.B) {
				bes := names(n)
				var worst, sum float64
				tries := min(n, 10)
				for range b.N {
					worst, sum = 0, 0
					for k := range tries {
						f := moved(b, bes, k*n/tries, m)
						worst, sum = max(worst, f), sum+f
					}
				}
				b.ReportMetric(sum/float64(tries)*float64(n), "moved×N")
				b.ReportMetric(worst*float64(n), "worst×N")
			})
		}
	}
}
