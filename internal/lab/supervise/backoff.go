package supervise

import (
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Default back-off of the lab's supervisors: the kubelet's policy at the
// lab's scale. The kubelet restarts an exited container at once the first
// time, then after its back-off, which starts at 10 s (1 s with the feature
// gate ReduceDefaultCrashLoopBackOffDecay) and doubles up to 5 min
// (crashLoopBackOff.maxContainerRestartPeriod, as low as 1 s, with
// KubeletCrashLoopBackOffMax). The lab starts at 1 s and caps at 10 s.
const (
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = 10 * time.Second
)

// backoffKey is the one key of the flowcontrol.Backoff: a Backoff follows one child.
const backoffKey = "child"

// Backoff decides when an exited child is started again, exactly as the
// kubelet's doBackOff does with its flowcontrol.Backoff: a child that exits
// while no back-off is in force is restarted at once, and the back-off starts
// at initial; one that exits while it is in force waits until the back-off has
// passed since its exit, and the back-off doubles, up to max. The back-off
// expires (the next restart is immediate again) when the child exits more
// than 2×max after its last restart, flowcontrol's rule (the kubelet uses
// 10 min for its cap of 5 min). Not safe for concurrent use.
type Backoff struct {
	b   *flowcontrol.Backoff
	clk clock.Clock
}

// NewBackoff returns a Backoff of initial doubling up to max, on clk (nil:
// the real clock).
func NewBackoff(initial, max time.Duration, clk clock.Clock) *Backoff {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Backoff{b: flowcontrol.NewFakeBackOff(initial, max, clk), clk: clk}
}

// Delay returns how long from now to wait before restarting a child that
// exited at finished: 0 when no back-off is in force.
func (b *Backoff) Delay(finished time.Time) time.Duration {
	if !b.b.IsInBackOffSince(backoffKey, finished) {
		return 0
	}
	return max(0, b.b.Get(backoffKey)-b.clk.Since(finished))
}

// Restarting records that a child that exited at finished is being started
// again (call it once Delay has passed): the next back-off is longer, or
// starts over when the last has expired.
func (b *Backoff) Restarting(finished time.Time) { b.b.Next(backoffKey, finished) }

// Current returns the back-off in force (0 when none).
func (b *Backoff) Current() time.Duration { return b.b.Get(backoffKey) }
