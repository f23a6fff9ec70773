package datapathbench

import (
	"context"
	"time"

	"github.com/svcnet/svcnet/internal/process"
)

// Quiet: after a swap the new agents keep working for a while after their
// first sync (a second sync, informer caches, garbage collection, the
// speakers' warm-up); runs measured then are slower for every path, the direct
// one included. Measuring starts once the agents are quiet.
const (
	quietWindow = time.Second
	quietShare  = 0.05 // of one CPU, over quietWindow
	quietLimit  = 30 * time.Second
)

// waitQuiet waits until the processes pids returns used at most quietShare
// of a CPU over a quietWindow, bounded by quietLimit (it then returns nil:
// an agent busy for good is measured as it is). It returns the time waited.
func waitQuiet(ctx context.Context, pids func() ([]int, error)) (time.Duration, error) {
	t0 := time.Now()
	for time.Since(t0) < quietLimit {
		ps, err := pids()
		if err != nil {
			return 0, err
		}
		before := cpuTime(ps)
		if err := sleep(ctx, quietWindow); err != nil {
			return 0, err
		}
		if used := cpuTime(ps) - before; used.Seconds() <= quietShare*quietWindow.Seconds() {
			return time.Since(t0), nil
		}
	}
	return time.Since(t0), nil
}

// cpuTime returns the CPU time (user and system) the pids have used; a pid
// that is gone counts 0.
func cpuTime(pids []int) time.Duration {
	var sum time.Duration
	for _, p := range pids {
		if d, err := process.CPUTime(p); err == nil {
			sum += d
		}
	}
	return sum
}
