package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/proxy"
)

// svcnet proxy's use of memory. A node agent runs on every node and holds the
// whole cluster's Services; what it costs there is memory, and most of that is
// garbage the Go runtime lets pile up between collections: with the default
// GOGC=100 the heap grows to twice the live state before the next collection,
// and the pages stay resident. --memory-limit auto (the default) bounds that
// garbage with a soft memory limit (debug.SetMemoryLimit) derived from what
// the proxy measures of itself:
//
//	limit = live heap + headroom + overhead
//
// live heap: as marked by the last collection (tracks the cluster's size, so
// the limit is recomputed after every sync); headroom: a quarter of it, at
// least minHeadroom (the garbage allowed between collections: one-Service
// changes leave a few hundred KB each at 10k Services, so collections stay
// rare), or all of it when the state comes from manifests (--state): every
// reload of them builds the cluster's objects whole again beside the live
// ones: at 10k Services, under a quarter's headroom the first reload after
// a full sync ran into the limit and a change took 0.5-0.8 s to reach the
// kernel; with the whole live heap, 0.15-0.27 s, at about 60 MiB more
// resident after changes (bench-sync svcnet-file); overhead: what the runtime holds besides live objects (fragmentation,
// GC metadata, stacks), measured after each full sync's forced collection.
//
// A full sync builds the whole ruleset at once (tens of MB at 10k Services,
// garbage once applied): the limit is lifted for it, so it runs at GOGC speed,
// and its memory is returned to the system right after (FreeOSMemory), which
// is also when the overhead is measured. Until the first full sync there is no
// limit. GOGC is left alone: with a small live heap its goal is below the
// limit and it decides.
//
// Under auto the policy also collects between syncs, when the garbage the
// next change is expected to leave (twice what the last one left) would
// start a collection during that change: marking the live heap of 10k
// Services (about 130 MB) takes 55-70 ms of a 2-CPU node, and a change it
// overlapped reached the kernel in 105-135 ms where the others took 40-65
// ms (bench-sync svcnet-file, which leaves about 20 MB per change). Such a
// collection is one the runtime would start a change or two later; it starts
// after a sync, when the node agent has nothing to do, in a goroutine of
// its own (one at a time): a change that comes meanwhile is synced at once,
// beside the marking, instead of after it.
//
// --memory-limit none leaves the runtime's defaults (and GOMEMLIMIT, which also
// turns auto off); a quantity (256Mi) sets a fixed limit, as GOMEMLIMIT would.

// Values of --memory-limit besides a quantity, and the mode of a quantity.
const (
	memoryLimitAuto  = "auto"
	memoryLimitNone  = "none"
	memoryLimitFixed = "fixed"
)

// Tuning of the auto limit.
const (
	headroomRatio         = 0.25
	manifestHeadroomRatio = 1.0
	minHeadroom           = 8 << 20
	// limitSlack is the change below which a new limit is not worth setting.
	limitSlack = 1 << 20
)

// parseMemoryLimit parses --memory-limit: auto, none, or a positive quantity.
// fixed is the quantity in bytes (0 for auto and none).
func parseMemoryLimit(v string) (mode string, fixed int64, err error) {
	switch strings.TrimSpace(v) {
	case memoryLimitAuto, "":
		return memoryLimitAuto, 0, nil
	case memoryLimitNone:
		return memoryLimitNone, 0, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Value() <= 0 {
		return "", 0, fmt.Errorf("--memory-limit %q: want %s, %s or a positive quantity such as 256Mi", v, memoryLimitAuto, memoryLimitNone)
	}
	return memoryLimitFixed, q.Value(), nil
}

// goRuntime is the part of the Go runtime the memory policy uses (a fake in
// tests).
type goRuntime interface {
	// Memory returns the live heap as of the last collection and the
	// memory a limit counts (Go's total, less what was released to the
	// system), in bytes.
	Memory() (live, footprint uint64)
	// SetMemoryLimit is debug.SetMemoryLimit.
	SetMemoryLimit(int64) int64
	// FreeOSMemory is debug.FreeOSMemory: a collection, then every free page
	// returned to the system.
	FreeOSMemory()
	// Heap returns the bytes of heap objects, live or not yet collected,
	// and the heap goal of the next collection.
	Heap() (objects, goal uint64)
	// GC is runtime.GC.
	GC()
}

// memoryPolicy applies --memory-limit around the proxier's syncs (its
// BeforeSync and OnSync hooks, called from the sync loop only). With auto
// off, it only returns a successful full sync's memory to the system.
type memoryPolicy struct {
	rt   goRuntime
	auto bool
	log  klog.Logger
	// headroom is the share of the live heap allowed as garbage.
	headroom float64
	// overhead is the footprint less the live heap after the last successful
	// full sync's collection; 0 until then (no limit yet).
	overhead uint64
	// limit is the limit in force (math.MaxInt64: none).
	limit int64
	// heap is the heap objects' bytes after the last sync (see
	// collectIfDue).
	heap uint64
	// background runs a collection collectIfDue starts (go f(); a test
	// waits for it); collecting is set while one runs.
	background func(f func())
	collecting atomic.Bool
}

// newMemoryPolicy returns the policy of --memory-limit value v and sets a
// fixed limit at once; manifests says the state comes from manifests (see
// the headroom above). GOMEMLIMIT in the environment takes precedence over
// auto.
func newMemoryPolicy(v string, manifests bool, rt goRuntime, log klog.Logger) (*memoryPolicy, error) {
	mode, fixed, err := parseMemoryLimit(v)
	if err != nil {
		return nil, err
	}
	p := &memoryPolicy{rt: rt, log: log, limit: math.MaxInt64, headroom: headroomRatio,
		background: func(f func()) { go f() }}
	if manifests {
		p.headroom = manifestHeadroomRatio
	}
	switch {
	case mode == memoryLimitFixed:
		p.limit = fixed
		rt.SetMemoryLimit(fixed)
	case mode == memoryLimitAuto && os.Getenv("GOMEMLIMIT") != "":
		log.Info("GOMEMLIMIT is set: --memory-limit auto leaves the limit to it", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
	case mode == memoryLimitAuto:
		p.auto = true
	}
	return p, nil
}

// beforeSync lifts the auto limit for a full sync.
func (p *memoryPolicy) beforeSync(full bool) {
	if p.auto && full {
		p.set(math.MaxInt64)
	}
}

// afterSync returns a successful full sync's memory to the system (it built
// the whole ruleset at once, garbage now; full syncs are rare, and without
// this the peak would stay resident until the scavenger returns it, minutes
// later), then sets the auto limit for the state now live.
func (p *memoryPolicy) afterSync(r proxy.SyncResult) {
	if r.Full && r.Err == nil {
		p.rt.FreeOSMemory()
	}
	if !p.auto {
		return
	}
	live, footprint := p.rt.Memory()
	if r.Full && r.Err == nil {
		p.overhead = footprint - min(live, footprint)
	}
	if p.overhead == 0 {
		return // no full sync yet: no limit
	}
	want := autoLimit(live, p.overhead, p.headroom)
	if diff := want - p.limit; diff > limitSlack || diff < -limitSlack {
		p.set(want)
		p.log.V(2).Info("Memory limit set", "limit", want, "liveHeap", live, "overhead", p.overhead)
	}
	p.collectIfDue(r.Full, live)
}

// triggerShare is where between the live heap and its goal a collection is
// taken to start: the runtime's pacer starts one before the goal (at
// about 0.7 to 0.95 of the way, as the last cycle went), so this errs
// early.
const triggerShare = 0.7

// collectIfDue starts a collection when the heap, grown again by twice
// what it grew since the last sync, would reach the point where the
// runtime starts one (see the policy above), unless one it started still
// runs. live is the live heap as of the last collection. The next sync
// finds the heap dropped and measures the growth from there.
func (p *memoryPolicy) collectIfDue(full bool, live uint64) {
	objects, goal := p.rt.Heap()
	grew := objects - min(p.heap, objects)
	if full || objects < p.heap {
		// A full sync collected (FreeOSMemory); a drop is a collection
		// since: the growth is measured from here.
		grew = 0
	}
	p.heap = objects
	if goal <= live || grew == 0 {
		return
	}
	trigger := live + uint64(triggerShare*float64(goal-live))
	if objects+2*grew < trigger || !p.collecting.CompareAndSwap(false, true) {
		return
	}
	p.background(func() {
		defer p.collecting.Store(false)
		p.rt.GC()
		after, _ := p.rt.Heap()
		p.log.V(4).Info("Collected between syncs", "heapBefore", objects, "grewLastChange", grew, "goal", goal, "heapAfter", after)
	})
}

// noHeapProfilesUnless turns heap sampling off unless profiles are served:
// heap profiles are read only through /debug/pprof (--profiling), and
// without it their samples (a stack per 512 KB allocated, about 1.5 MB after
// a full sync at 10k Services) would be kept for nobody. Call it once, early.
func noHeapProfilesUnless(profiling bool) {
	if !profiling {
		runtime.MemProfileRate = 0
	}
}

// autoLimit is live + headroom + overhead, headroom being ratio of live
// (see the policy above).
func autoLimit(live, overhead uint64, ratio float64) int64 {
	headroom := max(uint64(float64(live)*ratio), minHeadroom)
	return int64(min(live+headroom+overhead, math.MaxInt64))
}

func (p *memoryPolicy) set(limit int64) {
	if limit != p.limit {
		p.rt.SetMemoryLimit(limit)
		p.limit = limit
	}
}

// runtimeMemory is the real Go runtime.
type runtimeMemory struct{}

var memorySamples = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
}

var heapSamples = []string{
	"/memory/classes/heap/objects:bytes",
	"/gc/heap/goal:bytes",
}

// readUint64s reads the runtime metrics names (0 for one that is not a
// uint64).
func readUint64s(names []string) []uint64 {
	s := make([]metrics.Sample, len(names))
	for i, name := range names {
		s[i].Name = name
	}
	metrics.Read(s)
	out := make([]uint64, len(names))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			out[i] = s[i].Value.Uint64()
		}
	}
	return out
}

func (runtimeMemory) Memory() (live, footprint uint64) {
	v := readUint64s(memorySamples)
	total, released := v[1], v[2]
	return v[0], total - min(released, total)
}

func (runtimeMemory) Heap() (objects, goal uint64) {
	v := readUint64s(heapSamples)
	return v[0], v[1]
}

func (runtimeMemory) SetMemoryLimit(l int64) int64 { return debug.SetMemoryLimit(l) }
func (runtimeMemory) FreeOSMemory()                { debug.FreeOSMemory() }
func (runtimeMemory) GC()                          { runtime.GC() }
