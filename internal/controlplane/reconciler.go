package controlplane

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Reconciler is Reconcile with a memory of its last call: an object given
// again (the same pointer) is not validated again. Validation is most of a
// reconcile's cost (10,000 Services with one EndpointSlice each: about 100
// of 150 ms), and a reload after one edit gives all but one object again.
//
// Contract: an object given to a Reconciler is never modified afterwards
// (file.Cache gives the same object only for the same document). The
// Reconciler keeps what its last call was given, no more. It is not safe
// for concurrent use.
type Reconciler struct{ memo memo }

// Reconcile is the package's Reconcile, remembering validations.
func (r *Reconciler) Reconcile(cfg Config, objs []Object, prev State, now time.Time) Result {
	r.memo.next = make(map[runtime.Object]field.ErrorList, len(r.memo.last))
	res := reconcile(cfg, objs, prev, now, &r.memo)
	r.memo.last, r.memo.next = r.memo.next, nil
	return res
}

// memo holds validations by the caller's object: last from the previous
// call, next for this one.
type memo struct {
	last, next map[runtime.Object]field.ErrorList
}

// validate returns validate(), the validation of the copy made of src,
// from memory when src was validated by the previous call. Validation is a
// function of the object alone: the copy, prepared, is the same when src
// is.
func (in *intake) validate(src runtime.Object, validate func() field.ErrorList) field.ErrorList {
	if in.memo == nil || src == nil {
		return validate()
	}
	errs, ok := in.memo.last[src]
	if !ok {
		if errs, ok = in.memo.next[src]; !ok {
			errs = validate()
		}
	}
	in.memo.next[src] = errs
	return errs
}
