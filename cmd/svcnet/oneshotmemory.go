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
// manifests on the way) is 20-30 MB. These commands collect at a quarter
// instead, unless GOGC is set. `svcnet get services -A --state` on one
// manifest of Services, 2 CPUs:
//
//	10,000 Services: 0.18-0.23 s, 94-109 MB at GOGC=100; 0.23-0.29 s, 80-83 MB at 25
//	30,000 Services: 0.58-0.76 s, 200-222 MB at 100;     0.63-0.92 s, 156-163 MB at 25
//
// A fixed soft memory limit does as well at 10,000 and costs far more past
// it: at 40 MiB, 76-78 MB and 0.28-0.32 s at 10,000, but 1.73 s at 30,000,
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
