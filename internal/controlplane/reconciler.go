package controlplane

import (
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Reconciler is Reconcile with a memory of its last call. An object given
// again (the same pointer) is not validated again, and a Service or
// EndpointSlice given again is not copied and defaulted again: the
// Reconciler starts from the prepared copy it kept. Where the object the
// Result holds for it comes out as the last call's, the Result holds the
// last call's object itself, so a reader of consecutive Results can tell
// an unchanged object by its pointer. With 10,000 Services and one
// EndpointSlice each, copying, defaulting and validating them is about
// two thirds of a reconcile, and a reload after one edit gives all but one
// object again.
//
// Contract: an object given to a Reconciler is never modified afterwards
// (file.Cache gives the same object only for the same document), and the
// objects of its Results are never modified (they are shared between
// Results). The Reconciler keeps what its last call was given, no more,
// and forgets everything when the Config changes. It is not safe for
// concurrent use. Its Results are Reconcile's: TestReconcilerMatchesReconcile
// and FuzzReconciler hold them equal through sequences of changes.
type Reconciler struct {
	memo  memo
	cfg   Config
	since *since
	// changes counts the calls applied as a change.
	changes int
}

// Reconcile is the package's Reconcile, remembering what it can, and
// applying a small change as one (see since).
func (r *Reconciler) Reconcile(cfg Config, objs []Object, prev State, now time.Time) Result {
	if !sameConfig(cfg, r.cfg) {
		r.memo.last, r.since = nil, nil
		r.cfg = Config{ServiceCIDRs: slices.Clone(cfg.ServiceCIDRs), NodePortRange: cfg.NodePortRange}
	}
	if res, ok := r.change(objs, prev, now); ok {
		return res
	}
	r.memo.next = make(map[runtime.Object]*remembered, len(r.memo.last))
	res, in := reconcile(cfg, objs, prev, now, &r.memo, Scope{})
	r.memo.last, r.memo.next = r.memo.next, nil
	r.keep(cfg, objs, in, res, now.UTC().Truncate(time.Second))
	return res
}

func sameConfig(a, b Config) bool {
	return a.NodePortRange == b.NodePortRange && slices.Equal(a.ServiceCIDRs, b.ServiceCIDRs)
}

// memo holds what a Reconciler remembers by the caller's object: last from
// the previous call, next for this one.
type memo struct {
	last, next map[runtime.Object]*remembered
}

// remembered is what a Reconciler keeps of one caller's object.
type remembered struct {
	validated bool
	errs      field.ErrorList
	// prep is the prepared copy of a valid Service or EndpointSlice: its
	// namespace, defaults and UID (a Service: its IP families) filled in,
	// before anything that depends on other objects. It is never modified;
	// a reconcile works on a copy of it (see reuse).
	prep metav1.Object
	// out is the object the last Result held for it, if any.
	out metav1.Object
}

// entry returns what this call remembers of src, carried over from the
// previous call on first use.
func (m *memo) entry(src runtime.Object) *remembered {
	if r, ok := m.next[src]; ok {
		return r
	}
	r := &remembered{}
	if last, ok := m.last[src]; ok {
		*r = *last
	}
	m.next[src] = r
	return r
}

// validate returns validate(), the validation of the copy made of src,
// from memory when src was validated by the previous call. Validation is a
// function of the object alone: the copy, prepared, is the same when src
// is.
func (in *intake) validate(src runtime.Object, validate func() field.ErrorList) field.ErrorList {
	if in.memo == nil || src == nil {
		return validate()
	}
	r := in.memo.entry(src)
	if !r.validated {
		r.errs, r.validated = validate(), true
	}
	return r.errs
}

// reuse returns a working copy of the prepared copy kept for src, or nil
// when there is none. The working copy shares with the kept one everything
// a reconcile does not modify.
func (in *intake) reuse(src runtime.Object) metav1.Object {
	if in.memo == nil || src == nil {
		return nil
	}
	last := in.memo.last[src]
	if last == nil || last.prep == nil {
		return nil
	}
	if _, ok := in.memo.next[src]; ok {
		return nil // given twice: the second is a duplicate
	}
	r := *last
	in.memo.next[src] = &r
	w := workingCopy(r.prep)
	in.made[w] = src
	return w
}

// keepPrepared remembers obj, just prepared and found valid, as the
// prepared copy of src; nothing for a kind a Reconciler does not keep.
func (in *intake) keepPrepared(src runtime.Object, obj metav1.Object) {
	if in.memo == nil || src == nil {
		return
	}
	switch obj.(type) {
	case *corev1.Service, *discoveryv1.EndpointSlice:
		in.memo.entry(src).prep = workingCopy(obj)
		in.made[obj] = src
	}
}

// workingCopy copies what a reconcile modifies of a prepared object: a
// Service's ObjectMeta, Spec and Status fields and its ports (allocation
// writes node ports into them; its ClusterIPs are replaced, not written
// into), an EndpointSlice's ObjectMeta fields (its creationTimestamp).
func workingCopy(obj metav1.Object) metav1.Object {
	switch o := obj.(type) {
	case *corev1.Service:
		c := *o
		c.Spec.Ports = slices.Clone(o.Spec.Ports)
		return &c
	case *discoveryv1.EndpointSlice:
		c := *o
		return &c
	}
	panic("controlplane: no working copy of " + reflect.TypeOf(obj).String())
}

// intern replaces each object of list made from a caller's object by the
// object the last Result held for it when the two are the same (same
// reports that of two objects made from the same prepared copy), and
// remembers what list now holds.
func intern[T metav1.Object](in *intake, list []T, same func(a, b T) bool) {
	if in.memo == nil {
		return
	}
	for i, o := range list {
		src, ok := in.made[o]
		if !ok {
			continue
		}
		r := in.memo.entry(src)
		if last, ok := r.out.(T); ok && same(o, last) {
			list[i] = last
		}
		r.out = list[i]
	}
}

// sameService reports whether two Services made from one prepared copy
// are the same: they can differ only in what allocation, stampService and
// assignLoadBalancers write.
func sameService(a, b *corev1.Service) bool {
	if a.UID != b.UID || !a.CreationTimestamp.Equal(&b.CreationTimestamp) ||
		a.Spec.ClusterIP != b.Spec.ClusterIP || !slices.Equal(a.Spec.ClusterIPs, b.Spec.ClusterIPs) ||
		a.Spec.HealthCheckNodePort != b.Spec.HealthCheckNodePort || len(a.Spec.Ports) != len(b.Spec.Ports) {
		return false
	}
	for i := range a.Spec.Ports {
		if a.Spec.Ports[i].NodePort != b.Spec.Ports[i].NodePort {
			return false
		}
	}
	return reflect.DeepEqual(a.Status, b.Status)
}

// sameSlice reports whether two EndpointSlices made from one prepared copy
// are the same: they can differ only in the creationTimestamp stamped.
func sameSlice(a, b *discoveryv1.EndpointSlice) bool {
	return a.CreationTimestamp.Equal(&b.CreationTimestamp)
}
