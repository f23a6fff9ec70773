package datapathbench

import (
	"context"
	"sync/atomic"
	"time"
)

// A pair's two sides, the direct reference and the Service, are loaded in
// turns rather than one run after the other: the load moves between them
// every turnLen, in the order a b b a a b b a ..., until each side had its
// duration. A slow drift of the machine (another tenant's burst, a frequency
// change) then falls on both sides of the pair alike. Measured with both
// sides the same pod IP (an A/A test, 24 pairs of 250ms a side, keep-alive):
// the pair ratio's spread (sd of its log) was 10.3% with one 250ms run after
// the other and 4.5% in turns of 25ms; turns of 5ms gave no further gain.
const turnLen = 25 * time.Millisecond

// Sides of a pair.
const (
	sideDirect  = 0
	sideService = 1
)

// turnOrder returns the sides of n turns starting with first: first, other,
// other, first, first, other, ... (each block of four is balanced, so a
// drift linear in time weighs the same on both sides).
func turnOrder(first, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = turnSide(first, i)
	}
	return out
}

// turnSide is the side of turn i (0-based) of turnOrder.
func turnSide(first, i int) int {
	if i%4 == 1 || i%4 == 2 {
		return 1 - first
	}
	return first
}

// turnsFor returns how many turns give each side about d: a whole number of
// balanced blocks of four, at least one.
func turnsFor(d time.Duration) int {
	blocks := int((2*d + 2*turnLen) / (4 * turnLen)) // rounded to the nearest
	return 4 * max(1, blocks)
}

// turns hands a load to the sides in the order of turnOrder. Workers ask
// side before each operation and count the operation to that side; had,
// after the turns are over, is the time each side really had.
type turns struct {
	cur  atomic.Int32 // the side whose turn it is; -1 when over
	had  [2]time.Duration
	done chan struct{}
}

// startTurns starts the turns: first begins at once, each turn ends at its
// due time on the clock (a late wake-up shortens the next turn, and had
// records what each side got), and all end early when ctx ends.
func startTurns(ctx context.Context, first int, d time.Duration) *turns {
	order := turnOrder(first, turnsFor(d))
	t := &turns{done: make(chan struct{})}
	t.cur.Store(int32(order[0]))
	start := time.Now()
	go func() {
		defer close(t.done)
		defer t.cur.Store(-1)
		last := start
		for i, s := range order {
			t.cur.Store(int32(s))
			timer := time.NewTimer(time.Until(start.Add(time.Duration(i+1) * turnLen)))
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
			}
			now := time.Now()
			t.had[s] += now.Sub(last)
			last = now
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return t
}

// side returns the side whose turn it is, or -1 once the turns are over.
func (t *turns) side() int { return int(t.cur.Load()) }

// wait waits until the turns are over and returns the time each side had.
func (t *turns) wait() [2]time.Duration {
	<-t.done
	return t.had
}
