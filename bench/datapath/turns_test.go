package datapathbench

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestTurnOrder(t *testing.T) {
	if got, want := turnOrder(sideDirect, 8), []int{0, 1, 1, 0, 0, 1, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("turnOrder(direct, 8) = %v, want %v", got, want)
	}
	if got, want := turnOrder(sideService, 4), []int{1, 0, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("turnOrder(service, 4) = %v, want %v", got, want)
	}
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{250 * time.Millisecond, 20}, {time.Millisecond, 4}, {100 * time.Millisecond, 8}, {time.Second, 80}} {
		n := turnsFor(c.d)
		if n != c.want || n%4 != 0 {
			t.Errorf("turnsFor(%s) = %d, want %d", c.d, n, c.want)
		}
		// Balanced: each side gets half the turns.
		ones := 0
		for _, s := range turnOrder(sideDirect, n) {
			ones += s
		}
		if ones*2 != n {
			t.Errorf("turnOrder(direct, %d) gives the Service %d turns", n, ones)
		}
	}
}

// The turns visit both sides, end by themselves, and account every moment
// of their time to one side or the other; an ended context ends them early.
func TestTurns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	tr := startTurns(ctx, sideService, 50*time.Millisecond)
	seen := map[int]bool{}
	for s := tr.side(); s >= 0; s = tr.side() {
		seen[s] = true
		time.Sleep(time.Millisecond)
		if time.Since(t0) > 5*time.Second {
			t.Fatal("turns of 2x50ms not over after 5s")
		}
	}
	had := tr.wait()
	elapsed := time.Since(t0)
	if !seen[sideDirect] || !seen[sideService] {
		t.Errorf("sides seen %v, want both", seen)
	}
	if had[0] <= 0 || had[1] <= 0 || had[0]+had[1] > elapsed {
		t.Errorf("had %v over %s", had, elapsed)
	}
	if want := time.Duration(turnsFor(50*time.Millisecond)) * turnLen; had[0]+had[1] < want {
		t.Errorf("had %v, together less than the %s of the turns", had, want)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	tr = startTurns(ctx2, sideDirect, time.Hour)
	cancel2()
	select {
	case <-tr.done:
	case <-time.After(5 * time.Second):
		t.Fatal("turns of an hour not ended 5s after their context")
	}
	if tr.side() != -1 {
		t.Errorf("side after the end = %d, want -1", tr.side())
	}
}

// A pair is measured again when a side of a load was not loaded
// (errStarved): under half its time, or no request finished either way; a
// side whose requests all failed was loaded, and its path is dead.
func TestStarved(t *testing.T) {
	d := 200 * time.Millisecond
	for _, tt := range []struct {
		l    loadDone
		want bool
	}{
		{loadDone{had: 200 * time.Millisecond, oks: 900}, false},
		{loadDone{had: 100 * time.Millisecond, oks: 1}, false},
		{loadDone{had: 300 * time.Millisecond, errs: 8}, false},
		{loadDone{had: 3 * time.Millisecond, oks: 2}, true},
		{loadDone{had: 200 * time.Millisecond}, true},
		{loadDone{}, true},
	} {
		if got := tt.l.starved(d); got != tt.want {
			t.Errorf("%v starved of %s = %v, want %v", tt.l, d, got, tt.want)
		}
	}
	if got, want := (loadDone{had: 201400 * time.Microsecond, oks: 3, errs: 1}).String(), "3 answered and 1 failed in 201ms"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
