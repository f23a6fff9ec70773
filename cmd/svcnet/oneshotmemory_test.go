package main

import (
	"runtime/debug"
	"testing"
)

// TestOneShotMemory: a one-shot reader collects at a quarter of the live
// heap, unless the user set GOGC, and sets the target back after.
func TestOneShotMemory(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	t.Setenv("GOGC", "")
	restore := oneShotMemory()
	if got := debug.SetGCPercent(oneShotGCPercent); got != oneShotGCPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, oneShotGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after the command: GC percent %d, want 100 again", got)
	}
	t.Setenv("GOGC", "150")
	restore = oneShotMemory()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: GC percent %d, want it left at 100", got)
	}
	restore()
}
