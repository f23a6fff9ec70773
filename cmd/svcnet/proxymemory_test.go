package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/proxy"
)

// fakeRuntime records the limits set and frees, and reports the memory the
// test puts in it.
type fakeRuntime struct {
	live, footprint uint64
	limits          []int64
	frees           int
	// objects and goal are Heap's answer; a GC leaves live objects and
	// counts itself.
	objects, goal uint64
	gcs           int
}

func (f *fakeRuntime) Heap() (uint64, uint64) { return f.objects, f.goal }
func (f *fakeRuntime) GC()                    { f.gcs++; f.objects = f.live }

func (f *fakeRuntime) Memory() (uint64, uint64) { return f.live, f.footprint }
func (f *fakeRuntime) SetMemoryLimit(l int64) int64 {
	f.limits = append(f.limits, l)
	return l
}
func (f *fakeRuntime) FreeOSMemory() { f.frees++ }

// last returns the limit in force (MaxInt64 when none was ever set).
func (f *fakeRuntime) last() int64 {
	if len(f.limits) == 0 {
		return math.MaxInt64
	}
	return f.limits[len(f.limits)-1]
}

const mib = 1 << 20

func syncResult(full bool, err error) proxy.SyncResult {
	return proxy.SyncResult{Stats: dataplane.Stats{Full: full}, Err: err}
}

func TestParseMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		in    string
		mode  string
		fixed int64
		err   bool
	}{
		{"auto", memoryLimitAuto, 0, false},
		{"", memoryLimitAuto, 0, false},
		{"none", memoryLimitNone, 0, false},
		{"256Mi", memoryLimitFixed, 256 * mib, false},
		{"100000000", memoryLimitFixed, 100000000, false},
		{"0", "", 0, true},
		{"-1Mi", "", 0, true},
		{"lots", "", 0, true},
	} {
		mode, fixed, err := parseMemoryLimit(tt.in)
		if (err != nil) != tt.err || mode != tt.mode || fixed != tt.fixed {
			t.Errorf("parseMemoryLimit(%q) = %q, %d, %v; want %q, %d, error %v", tt.in, mode, fixed, err, tt.mode, tt.fixed, tt.err)
		}
		if err != nil && !strings.Contains(err.Error(), "--memory-limit") {
			t.Errorf("parseMemoryLimit(%q): error %q does not name the flag", tt.in, err)
		}
	}
}

// TestMemoryPolicyAuto walks the auto limit through a proxy's life: none
// until the first full sync; then live + headroom + overhead; lifted for
// every full sync and set again after it, also after a failed one; following
// the live heap, but not for changes under a MiB.
func TestMemoryPolicyAuto(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	rt := &fakeRuntime{}
	p, err := newMemoryPolicy("auto", false, rt, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, full bool, err error, live, footprint uint64, want int64) {
		t.Helper()
		rt.live, rt.footprint = live, footprint
		p.beforeSync(full)
		if full && rt.last() != math.MaxInt64 {
			t.Errorf("%s: limit %d during a full sync, want none", what, rt.last())
		}
		p.afterSync(syncResult(full, err))
		if got := rt.last(); got != want {
			t.Errorf("%s: limit %d, want %d", what, got, want)
		}
	}
	step("partial sync before any full one", false, nil, 10*mib, 20*mib, math.MaxInt64)
	step("failed first full sync", true, errors.New("boom"), 10*mib, 20*mib, math.MaxInt64)
	// overhead 17 MiB; headroom max(32/4, 8) = 8 MiB.
	step("first full sync", true, nil, 32*mib, 49*mib, (32+8+17)*mib)
	step("partial sync, live heap up 512 KiB", false, nil, 32*mib+512<<10, 60*mib, (32+8+17)*mib)
	// 64 MiB live: headroom 16 MiB.
	step("partial sync, live heap doubled", false, nil, 64*mib, 90*mib, (64+16+17)*mib)
	step("failed full sync", true, errors.New("boom"), 64*mib, 200*mib, (64+16+17)*mib)
	// A small live heap: the minimum headroom; the overhead is measured again.
	step("full sync after Services left", true, nil, 4*mib, 12*mib, (4+8+8)*mib)
	if rt.frees != 2 {
		t.Errorf("FreeOSMemory called %d times, want once per successful full sync (2)", rt.frees)
	}
}

// TestMemoryPolicyFixedAndNone: a fixed limit is set once and kept through
// syncs; none and GOMEMLIMIT set nothing. Every mode returns a successful
// full sync's memory.
func TestMemoryPolicyFixedAndNone(t *testing.T) {
	for _, tt := range []struct {
		flag, env string
		want      []int64
	}{
		{"200Mi", "", []int64{200 * mib}},
		{"none", "", nil},
		{"auto", "300MiB", nil},
	} {
		t.Run(tt.flag+" "+tt.env, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tt.env)
			rt := &fakeRuntime{live: 32 * mib, footprint: 49 * mib}
			p, err := newMemoryPolicy(tt.flag, false, rt, klog.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, full := range []bool{true, false, true} {
				p.beforeSync(full)
				p.afterSync(syncResult(full, nil))
			}
			if len(rt.limits) != len(tt.want) || (len(tt.want) > 0 && rt.limits[0] != tt.want[0]) {
				t.Errorf("limits set %v, want %v", rt.limits, tt.want)
			}
			if rt.frees != 2 {
				t.Errorf("FreeOSMemory called %d times, want 2", rt.frees)
			}
		})
	}
	if _, err := newMemoryPolicy("lots", false, &fakeRuntime{}, klog.Background()); err == nil {
		t.Error("newMemoryPolicy accepted --memory-limit lots")
	}
}

// TestRuntimeMemory: the real runtime reports, after a collection (GC), a
// live heap within its footprint, and a heap and its goal.
func TestRuntimeMemory(t *testing.T) {
	// The live heap is as of the last collection: none may have run yet
	// in a short test process.
	runtimeMemory{}.GC()
	live, footprint := runtimeMemory{}.Memory()
	if live == 0 || footprint < live {
		t.Errorf("live %d, footprint %d: want 0 < live <= footprint", live, footprint)
	}
	if objects, goal := (runtimeMemory{}).Heap(); objects == 0 || goal == 0 {
		t.Errorf("heap objects %d, goal %d: want both above 0", objects, goal)
	}
}

// TestMemoryPolicyManifests: with the state from manifests the headroom is
// the whole live heap (a reload builds the objects again beside the live
// ones).
func TestMemoryPolicyManifests(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	rt := &fakeRuntime{}
	p, err := newMemoryPolicy("auto", true, rt, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	rt.live, rt.footprint = 64*mib, 81*mib
	p.beforeSync(true)
	p.afterSync(syncResult(true, nil))
	if got, want := rt.last(), int64((64+64+17)*mib); got != want {
		t.Errorf("limit %d after the first full sync, want %d (live 64 MiB, headroom 64 MiB, overhead 17 MiB)", got, want)
	}
}

// TestMemoryPolicyCollectsBetweenSyncs: after a sync, the policy collects
// when the heap, grown again by twice the last change's growth, would pass
// the point where the runtime starts a collection (taken at 70% of the way
// from the live heap to the goal), and not before; a full sync, or a
// collection the runtime ran (the heap dropped), starts the measure again;
// off without auto.
func TestMemoryPolicyCollectsBetweenSyncs(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	rt := &fakeRuntime{live: 100 * mib, footprint: 120 * mib, objects: 100 * mib, goal: 200 * mib}
	p, err := newMemoryPolicy("auto", true, rt, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.background = func(f func()) { f() } // the collection done when afterSync returns
	p.beforeSync(true)
	p.afterSync(syncResult(true, nil))
	// The trigger is taken at 170 MiB.
	for i, step := range []struct {
		heap uint64 // MiB after the change
		gcs  int
	}{
		{120, 0}, // +20: 120 + 40 < 170
		{140, 1}, // +20: 140 + 40 >= 170: collected, back to the live 100
		{110, 1}, // +10: 110 + 20 < 170
		{105, 1}, // the runtime collected in between: measured again from here
		{135, 2}, // +30: 135 + 60 >= 170
	} {
		rt.objects = step.heap * mib
		p.afterSync(syncResult(false, nil))
		if rt.gcs != step.gcs {
			t.Fatalf("step %d (heap %d MiB): %d collections, want %d", i+1, step.heap, rt.gcs, step.gcs)
		}
	}
	if rt.objects != rt.live {
		t.Errorf("heap %d MiB after the collection, want the live %d MiB", rt.objects/mib, rt.live/mib)
	}

	off := &fakeRuntime{live: 100 * mib, footprint: 120 * mib, objects: 100 * mib, goal: 200 * mib}
	p, err = newMemoryPolicy("none", true, off, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.afterSync(syncResult(true, nil))
	for range 5 {
		off.objects += 20 * mib
		p.afterSync(syncResult(false, nil))
	}
	if off.gcs != 0 {
		t.Errorf("--memory-limit none: %d collections, want none (the runtime's defaults)", off.gcs)
	}
}

// blockingRuntime is a fakeRuntime whose GC waits until release is closed.
type blockingRuntime struct {
	fakeRuntime
	started chan struct{}
	release chan struct{}
}

func (b *blockingRuntime) GC() {
	b.started <- struct{}{}
	<-b.release
}

// TestMemoryPolicyCollectsInTheBackground: a collection between syncs runs
// beside the sync loop: afterSync returns while it marks, a sync meanwhile
// that would start another does not, and once it ended the next can.
func TestMemoryPolicyCollectsInTheBackground(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	rt := &blockingRuntime{fakeRuntime: fakeRuntime{live: 100 * mib, footprint: 120 * mib, objects: 100 * mib, goal: 200 * mib},
		started: make(chan struct{}, 2), release: make(chan struct{})}
	p, err := newMemoryPolicy("auto", true, rt, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	p.background = func(f func()) { go func() { f(); done <- struct{}{} }() }
	p.afterSync(syncResult(true, nil))
	rt.objects = 140 * mib
	p.afterSync(syncResult(false, nil)) // due: starts one, returns at once
	select {
	case <-rt.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no collection started")
	}
	rt.objects = 180 * mib
	p.afterSync(syncResult(false, nil)) // due again, but one runs
	close(rt.release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the collection did not end")
	}
	if n := len(rt.started); n != 0 {
		t.Fatalf("%d more collections started while one ran, want none", n)
	}
	rt.objects = 195 * mib
	p.afterSync(syncResult(false, nil))
	select {
	case <-rt.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no collection started after the first ended")
	}
	<-done
}
