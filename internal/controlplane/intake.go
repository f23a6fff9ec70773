//lint:file-ignore SA1019 legacy v1 Endpoints are read and mirrored on purpose, as kube-controller-manager does

package controlplane

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

// Kinds the control plane handles.
const (
	kindService       = "Service"
	kindPod           = "Pod"
	kindNode          = "Node"
	kindNamespace     = "Namespace"
	kindEndpoints     = "Endpoints"
	kindEndpointSlice = "EndpointSlice"
)

// entry is one accepted input object: a deep copy (the caller's only when
// given up, Scope.Owned), its namespace defaulted, with its position in the
// input for error ordering.
type entry[T any] struct {
	idx    int
	origin string
	obj    T
	// src is the caller's object obj was copied from: the key of what a
	// Reconciler remembers of it.
	src runtime.Object
	// reused: obj is a working copy of the prepared copy a Reconciler
	// kept, already defaulted and valid.
	reused bool
}

// intake is the input sorted by kind, duplicates and unknown kinds already turned
// into errors.
type intake struct {
	services   []entry[*corev1.Service]
	pods       []entry[*corev1.Pod]
	nodes      []entry[*corev1.Node]
	namespaces []entry[*corev1.Namespace]
	endpoints  []entry[*corev1.Endpoints]
	slices     []entry[*discoveryv1.EndpointSlice]
	pools      []entry[*pool.IPAddressPool]
	// lbStatus is each given Service's status.loadBalancer as written, before
	// create clears it (see assignLoadBalancers).
	lbStatus map[string]corev1.LoadBalancerStatus
	// origins maps each object's kind, namespace and name to its origin,
	// for a Reconciler (which keeps it); nil for a one-shot reconcile, whose
	// peak it would add to (1.1 MB at 10,000 Services).
	origins map[objectKey]string
	// svcOrigins maps a Service's "namespace/name" to its origin, made by
	// the first serviceOrigin when origins is nil.
	svcOrigins map[string]string
	errs       errorSink
	// relational: an error depends on other objects than its own (a
	// duplicate, an allocation that met another Service's), so a change
	// to those may lift or move it.
	relational bool
	// memo is a Reconciler's memory; nil: none.
	memo *memo
	// made maps each Service and EndpointSlice a Reconciler may intern to
	// the caller's object it was made from.
	made map[metav1.Object]runtime.Object
	// al is the Services' allocator once they are allocated.
	al *allocator
	// sb is the slice builder once the slices are built.
	sb *sliceBuilder
}

// errorSink collects ObjectErrors with the input position of their object.
type errorSink struct{ list []indexedError }

type indexedError struct {
	idx int
	err *ObjectError
}

func (s *errorSink) add(idx int, origin, kind string, m metav1.Object, err error) {
	s.list = append(s.list, indexedError{idx, &ObjectError{
		Origin: origin, Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(), Err: err,
	}})
}

// readObjects deep-copies and classifies objs; owned (Scope.Owned) takes
// each object given for the first time as it is. Namespaced objects with no
// namespace get "default", as kubectl and the apiserver would give them. The
// second object with the same kind, namespace and name is an ErrDuplicate
// naming the first's origin.
func readObjects(objs []Object, mm *memo, owned bool) *intake {
	firstOrigin := make(map[objectKey]string, len(objs))
	in := &intake{lbStatus: map[string]corev1.LoadBalancerStatus{}, memo: mm}
	if mm != nil {
		in.made = make(map[metav1.Object]runtime.Object, len(objs))
		in.origins = firstOrigin
	}
	var taken map[runtime.Object]bool
	if owned {
		taken = make(map[runtime.Object]bool, len(objs))
	}
	for i, o := range objs {
		kind, m, ok := "", in.reuse(o.Obj), true
		reused := m != nil
		if reused {
			kind = kindOf(m)
		} else {
			mineNow := owned && !isNil(o.Obj) && !taken[o.Obj]
			if mineNow {
				taken[o.Obj] = true
			}
			kind, m, ok = classify(o.Obj, mineNow)
		}
		if !ok {
			in.errs.add(i, o.Origin, kind, m, ErrUnknownKind)
			continue
		}
		if m.GetName() != "" {
			key := objectKey{kind, m.GetNamespace(), m.GetName()}
			if first, dup := firstOrigin[key]; dup {
				in.errs.add(i, o.Origin, kind, m, fmt.Errorf("%w: already defined in %s", ErrDuplicate, first))
				in.relational = true
				continue
			}
			firstOrigin[key] = o.Origin
		}
		in.add(i, o.Origin, m, o.Obj, reused)
	}
	return in
}

// kindOf is the kind of a prepared copy a Reconciler keeps.
func kindOf(m metav1.Object) string {
	if _, ok := m.(*corev1.Service); ok {
		return kindService
	}
	return kindEndpointSlice
}

// objectKey names an object: its kind, namespace and name.
type objectKey struct{ kind, namespace, name string }

// serviceOrigin returns the origin of the Service taken in whose key
// ("namespace/name") is key.
func (in *intake) serviceOrigin(key string) string {
	if in.origins != nil {
		ns, name, _ := strings.Cut(key, "/")
		return in.origins[objectKey{kindService, ns, name}]
	}
	if in.svcOrigins == nil {
		in.svcOrigins = make(map[string]string, len(in.services))
		for _, e := range in.services {
			in.svcOrigins[serviceKey(e.obj)] = e.origin
		}
	}
	return in.svcOrigins[key]
}

// classify deep-copies obj (unless owned: the control plane may modify it)
// and defaults its namespace. ok is false for a kind the control plane does
// not handle; kind then names it as well as can be told.
func classify(obj runtime.Object, owned bool) (kind string, m metav1.Object, ok bool) {
	if isNil(obj) {
		return "<nil>", &metav1.ObjectMeta{}, false
	}
	switch o := obj.(type) {
	case *corev1.Service:
		return kindService, withNamespace(mine(o, owned)), true
	case *corev1.Pod:
		return kindPod, withNamespace(mine(o, owned)), true
	case *corev1.Endpoints:
		return kindEndpoints, withNamespace(mine(o, owned)), true
	case *discoveryv1.EndpointSlice:
		return kindEndpointSlice, withNamespace(mine(o, owned)), true
	case *corev1.Node:
		return kindNode, mine(o, owned), true
	case *corev1.Namespace:
		return kindNamespace, mine(o, owned), true
	case *pool.IPAddressPool:
		return kindIPAddressPool, mine(o, owned), true
	}
	m = &metav1.ObjectMeta{}
	kind = obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = reflect.Indirect(reflect.ValueOf(obj)).Type().Name()
	}
	if a, err := meta.Accessor(obj); err == nil {
		m = a
	}
	return kind, m, false
}

// mine is o when owned, else a deep copy of it.
func mine[T interface{ DeepCopy() T }](o T, owned bool) T {
	if owned {
		return o
	}
	return o.DeepCopy()
}

func isNil(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func withNamespace[T metav1.Object](o T) T {
	if o.GetNamespace() == "" {
		o.SetNamespace(metav1.NamespaceDefault)
	}
	return o
}

// add takes m, copied from src (reused: a working copy of its prepared
// copy). A Service's status.loadBalancer is read from src, as written.
func (in *intake) add(i int, origin string, m metav1.Object, src runtime.Object, reused bool) {
	switch o := m.(type) {
	case *corev1.Service:
		in.services = append(in.services, entry[*corev1.Service]{i, origin, o, src, reused})
		if given := src.(*corev1.Service).Status.LoadBalancer; len(given.Ingress) > 0 {
			in.lbStatus[serviceKey(o)] = *given.DeepCopy()
		}
	case *corev1.Pod:
		in.pods = append(in.pods, entry[*corev1.Pod]{i, origin, o, src, reused})
	case *corev1.Node:
		in.nodes = append(in.nodes, entry[*corev1.Node]{i, origin, o, src, reused})
	case *corev1.Namespace:
		in.namespaces = append(in.namespaces, entry[*corev1.Namespace]{i, origin, o, src, reused})
	case *corev1.Endpoints:
		in.endpoints = append(in.endpoints, entry[*corev1.Endpoints]{i, origin, o, src, reused})
	case *discoveryv1.EndpointSlice:
		in.slices = append(in.slices, entry[*discoveryv1.EndpointSlice]{i, origin, o, src, reused})
	case *pool.IPAddressPool:
		in.pools = append(in.pools, entry[*pool.IPAddressPool]{i, origin, o, src, reused})
	}
}
