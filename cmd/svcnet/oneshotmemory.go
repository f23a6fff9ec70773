package main

import (
	"os"
	"runtime/debug"
)

// A one-shot reader (svcnet get, svcnet describe, and the same in the lab)
// loads the whole cluster state once, prints what was asked and exits; its
// peak memory is the live state plus the garbage the collector lets grow
// beside it. With Go's default GOGC=100 the heap grows to twice the live
// state before each collection, and at 10,000 Services the live state (the
// Services as the control plane made them, its allocations, the decoded
// manifests on the way) peaks at 24-26 MB. These commands collect at a
// quarter instead, unless GOGC is set. `svcnet get services -A --state` on
// one manifest of Services, 2 CPUs, the binary read from disk, maximum RSS:
//
//	10,000 Services: 0.15-0.22 s, 72-76 MiB at GOGC=100; 0.20-0.32 s, 67-69 MiB at 25
//	30,000 Services: 0.47-0.59 s, 142-148 MiB at 100;   0.60-0.74 s, 128-133 MiB at 25
//
// A fixed soft memory limit does better at 10,000 and far worse past it:
// at 40 MiB, 67-68 MiB and 0.18-0.24 s at 10,000, but 1.4-1.7 s at 30,000,
// where the live state is above the limit and the collector runs without
// pause.
const oneShotGCPercent = 25

// oneShotMemory sets the collector's target for a one-shot reader, unless
// the user set GOGC, and returns what sets it back (for a command run in
// a longer process, as the tests run them).
func oneShotMemory() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(oneShotGCPercent)
	return func() { debug.SetGCPercent(old) }
}
