package controlplane

import (
	"runtime"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Defaulting and validating an object reads only that object, so a
// reconcile prepares and validates the objects it was not given before on
// every CPU, ahead of its sequential pass, which takes each result in
// input order: what it returns is the same as preparing and validating one
// object after the other. Validation (apimachinery's name, label and port
// checks) is about 36% of a first reconcile of 10,000 Services with one
// EndpointSlice each (pprof, one CPU); on 2 CPUs that reconcile takes
// 95-100 ms instead of 112-127 ms.

// prevalidateMin is the fewest objects worth validating in parallel: below
// it, starting goroutines costs more than it saves.
const prevalidateMin = 256

// checked is one object prepared and validated ahead of the sequential
// pass.
type checked struct {
	done bool
	errs field.ErrorList
}

// prevalidate prepares and validates the entries a Reconciler did not
// reuse, in parallel, and returns what validate gave each, by position;
// none (nil) when there are too few to be worth it, and the caller
// prepares and validates them itself.
func prevalidate[T metav1.Object](entries []entry[T], prepare func(T), validate func(T) field.ErrorList) []checked {
	todo := 0
	for _, e := range entries {
		if !e.reused {
			todo++
		}
	}
	workers := min(runtime.GOMAXPROCS(0), todo/prevalidateMin)
	if workers < 2 {
		return nil
	}
	out := make([]checked, len(entries))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(entries); i += workers {
				if e := entries[i]; !e.reused {
					prepare(e.obj)
					out[i] = checked{done: true, errs: validate(e.obj)}
				}
			}
		})
	}
	wg.Wait()
	return out
}

// prepared prepares and validates entry i of entries, or takes what
// prevalidate gave it (pre); the validation through in, so that a
// Reconciler remembers it.
func prepared[T metav1.Object](in *intake, pre []checked, i int, e entry[T], prepare func(T), validate func(T) field.ErrorList) field.ErrorList {
	if i < len(pre) && pre[i].done {
		return in.validate(e.src, func() field.ErrorList { return pre[i].errs })
	}
	prepare(e.obj)
	return in.validate(e.src, func() field.ErrorList { return validate(e.obj) })
}
