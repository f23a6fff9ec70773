package supervise

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A child that crashes as soon as it starts is restarted at once, then after
// 1, 2, 4 and 8 s, then every 10 s; the wait counts from its exit.
func TestBackoffCrashLoop(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	b := NewBackoff(time.Second, 10*time.Second, clk)
	want := []time.Duration{0, 1, 2, 4, 8, 10, 10, 10}
	for i, w := range want {
		clk.Step(50 * time.Millisecond) // it ran 50 ms
		exited := clk.Now()
		if got := b.Delay(exited); got != w*time.Second {
			t.Fatalf("exit %d: delay %v, want %v", i+1, got, w*time.Second)
		}
		clk.Step(w * time.Second)
		if got := b.Delay(exited); got != 0 {
			t.Fatalf("exit %d: %v after the exit the delay is %v, want 0", i+1, w*time.Second, got)
		}
		b.Restarting(exited)
	}
}

// The wait is the back-off less the time since the exit.
func TestBackoffCountsFromExit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	b := NewBackoff(time.Second, 10*time.Second, clk)
	exited := clk.Now()
	b.Restarting(exited) // first exit: immediate restart
	clk.Step(100 * time.Millisecond)
	exited = clk.Now()
	clk.Step(400 * time.Millisecond)
	if got, want := b.Delay(exited), 600*time.Millisecond; got != want {
		t.Fatalf("delay %v, want %v", got, want)
	}
}

// The back-off expires when the child ran more than 2×max (20 s) after its
// last restart: the next restart is immediate and the back-off starts over at
// 1 s. A child that ran less keeps the back-off it had.
func TestBackoffResetsAfterRunningWell(t *testing.T) {
	for _, tc := range []struct {
		ran       time.Duration
		wantDelay time.Duration
		wantNext  time.Duration // the delay of a crash right after that restart
	}{
		{ran: 19 * time.Second, wantDelay: 10 * time.Second, wantNext: 10 * time.Second},
		{ran: 21 * time.Second, wantDelay: 0, wantNext: time.Second},
	} {
		clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		b := NewBackoff(time.Second, 10*time.Second, clk)
		// Crash-loop up to the cap.
		for range 6 {
			exited := clk.Now()
			clk.Step(b.Delay(exited))
			b.Restarting(exited)
		}
		if b.Current() != 10*time.Second {
			t.Fatalf("back-off %v after the crash loop, want the cap 10s", b.Current())
		}
		clk.Step(tc.ran)
		exited := clk.Now()
		if got := b.Delay(exited); got != tc.wantDelay {
			t.Fatalf("ran %v: delay %v, want %v", tc.ran, got, tc.wantDelay)
		}
		clk.Step(tc.wantDelay)
		b.Restarting(exited)
		clk.Step(10 * time.Millisecond)
		if got := b.Delay(clk.Now()); got != tc.wantNext {
			t.Fatalf("ran %v, restarted: the next crash waits %v, want %v", tc.ran, got, tc.wantNext)
		}
	}
}
