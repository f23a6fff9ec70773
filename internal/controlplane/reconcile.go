//lint:file-ignore SA1019 a Result carries an API server's v1 Endpoints for get ep, as kubectl lists them

package controlplane

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

// Result is the cluster as the API would hold it after the control plane has
// processed the manifests. Every list is sorted by namespace/name; every object is
// the control plane's own copy, or an object the caller gave up (Scope.Owned).
type Result struct {
	// Services are defaulted and allocated (TypeMeta v1/Service), default/kubernetes
	// included.
	Services []*corev1.Service
	// EndpointSlices are built from Pods, given by the user (for any Service), or
	// mirrored from legacy Endpoints of selector-less Services.
	EndpointSlices []*discoveryv1.EndpointSlice
	Pods           []*corev1.Pod
	// Endpoints are v1 Endpoints as an API server lists them (svcnet get
	// from a cluster); the embedded control plane keeps none, and kubectl
	// get's reader derives them from the EndpointSlices.
	Endpoints []*corev1.Endpoints
	Nodes     []*corev1.Node
	// Namespaces are the given ones plus the system ones the apiserver creates.
	Namespaces []*corev1.Namespace
	// Pools are the admitted IPAddressPools (svcnet lb's), sorted by name; a pool
	// that is invalid, or that pool.Admit refuses (it overlaps an older pool, or
	// holds a node's address, a pod CIDR or a service CIDR), is in Errors.
	Pools []*pool.IPAddressPool
	// Errors are the objects left out, in input order.
	Errors []*ObjectError
	// Warnings are about objects kept but not fully served: a LoadBalancer Service
	// still pending its IP (the reason names the pool), as its Events would say.
	Warnings []*ObjectError
	// State is what to persist: the allocations of the Services still present.
	State State
	// Events are svcnet lb's events for what this reconcile decided, stamped
	// now: per LoadBalancer Service of its class IPAllocated (addresses and
	// pool) or AllocationFailed (why), per admitted pool PoolAccepted or
	// ReservedAddresses. They repeat on every reconcile; a recorder keeps
	// what changed (see the lab's event store).
	Events []corev1.Event
}

// Reconcile does what kube-apiserver and kube-controller-manager would do with
// objs: default and validate every object, allocate ClusterIPs, node ports and
// health check ports (keeping what prev gave each Service), create
// default/kubernetes, and build EndpointSlices. An invalid object is left out and
// reported in Result.Errors; it never keeps the others out.
//
// Reconcile is pure and deterministic: it reads no clock (now stamps new
// Services), and the same inputs, in any order, give the same Result. It does not
// modify objs or prev. Empty fields of cfg get their defaults; a cfg that fails
// Validate makes every Service an error and returns prev's allocations unchanged.
func Reconcile(cfg Config, objs []Object, prev State, now time.Time) Result {
	res, _ := reconcile(cfg, objs, prev, now, nil, Scope{})
	return res
}

// Scope is what a one-shot reader of a Result gives up and leaves out, so
// that a reconcile of many objects holds fewer of them at once: with
// 10,000 Services, the copies of the input are about 20 MB and the
// Services' EndpointSlices about 6 MB of what `svcnet get services`
// holds at its peak.
type Scope struct {
	// Owned: the caller gives objs up. Reconcile defaults and allocates
	// them in place, and the Result holds them rather than copies; an
	// object given twice (the same pointer) is copied the second time.
	// The caller must not read objs afterwards.
	Owned bool
	// NoEndpointSlices: the reader shows no EndpointSlices, so the Result
	// holds none and the State stamps none; EndpointSlices and Endpoints
	// given are neither checked nor reported (a reader of some kinds
	// gives none). They are built all the same when a pool of mode nodeIP
	// is given: its addresses follow the nodes that hold a ready endpoint.
	NoEndpointSlices bool
}

// ReconcileScoped is Reconcile for a reader that needs only what scope
// leaves in; what it returns of the rest is what Reconcile returns.
func ReconcileScoped(cfg Config, objs []Object, prev State, now time.Time, scope Scope) Result {
	res, _ := reconcile(cfg, objs, prev, now, nil, scope)
	return res
}

// reconcile is Reconcile remembering in mm (when not nil); it returns the
// intake too.
func reconcile(cfg Config, objs []Object, prev State, now time.Time, mm *memo, scope Scope) (Result, *intake) {
	cfg = cfg.WithDefaults()
	now = now.UTC().Truncate(time.Second)
	in := readObjects(objs, mm, scope.Owned)
	var res Result
	res.Services, res.State = reconcileServices(cfg, in, prev, now)
	res.Nodes = prepareNodes(in)
	res.Pods = preparePods(in)
	admitPodTopology(res.Pods, res.Nodes)
	res.Namespaces = prepareNamespaces(in)
	if !scope.NoEndpointSlices || in.nodeIPPool() {
		res.EndpointSlices = buildSlices(in, res.Services, res.Pods, res.Nodes)
	}
	res.Pools = preparePools(in)
	// Pools are ordered by creationTimestamp when admitted: stamp them first.
	poolsCreated := stampCreated(prev.Created, now, kindIPAddressPool, res.Pools, nil)
	assignLoadBalancers(cfg, in, &res, prev, &res.State, now)
	if cfg.Validate() != nil {
		res.State.Created = prev.Created // as the allocations: unchanged
	} else {
		res.State.Created = stampCreated(prev.Created, now, kindPod, res.Pods, poolsCreated)
		stampCreated(prev.Created, now, kindNode, res.Nodes, res.State.Created)
		stampCreated(prev.Created, now, kindNamespace, res.Namespaces, res.State.Created)
		stampCreated(prev.Created, now, kindEndpointSlice, res.EndpointSlices, res.State.Created)
	}
	intern(in, res.Services, sameService)
	intern(in, res.EndpointSlices, sameSlice)
	slices.SortStableFunc(in.errs.list, func(a, b indexedError) int { return cmp.Compare(a.idx, b.idx) })
	for _, e := range in.errs.list {
		res.Errors = append(res.Errors, e.err)
	}
	return res, in
}

// prepareAll defaults and validates the entries of one kind, reports the invalid
// ones, fills in a missing UID, and returns the valid objects sorted. An entry
// a Reconciler reused is all that already.
func prepareAll[T metav1.Object](in *intake, kind string, entries []entry[T], prepare func(T), validate func(T) field.ErrorList) []T {
	var out []T
	pre := prevalidate(entries, prepare, validate)
	for i, e := range entries {
		if e.reused {
			out = append(out, e.obj)
			continue
		}
		if errs := prepared(in, pre, i, e, prepare, validate); len(errs) > 0 {
			in.errs.add(e.idx, e.origin, kind, e.obj, toError(errs))
			continue
		}
		if e.obj.GetUID() == "" {
			e.obj.SetUID(makeUID(kind, e.obj.GetNamespace(), e.obj.GetName()))
		}
		in.keepPrepared(e.src, e.obj)
		out = append(out, e.obj)
	}
	sortObjects(out)
	return out
}

func sortObjects[T metav1.Object](list []T) {
	slices.SortFunc(list, func(a, b T) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
}

func preparePods(in *intake) []*corev1.Pod {
	return prepareAll(in, kindPod, in.pods, preparePod, validatePod)
}

func prepareNodes(in *intake) []*corev1.Node {
	return prepareAll(in, kindNode, in.nodes, prepareNode, validateNode)
}

// prepareNamespaces adds the system Namespaces the manifests do not define.
func prepareNamespaces(in *intake) []*corev1.Namespace {
	out := prepareAll(in, kindNamespace, in.namespaces, prepareNamespace, validateNamespace)
	have := map[string]bool{}
	for _, ns := range out {
		have[ns.Name] = true
	}
	for _, name := range systemNamespaces {
		if !have[name] {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: makeUID(kindNamespace, "", name)}}
			prepareNamespace(ns)
			out = append(out, ns)
		}
	}
	sortObjects(out)
	return out
}

// stampCreated gives every object without a creationTimestamp the time it was first
// seen (from prev, else now) and records it in out (allocated when nil), which it
// returns. Objects that name their own creationTimestamp keep it.
func stampCreated[T metav1.Object](prev map[string]time.Time, now time.Time, kind string, objs []T, out map[string]time.Time) map[string]time.Time {
	if out == nil {
		out = map[string]time.Time{}
	}
	for _, o := range objs {
		key := kind + "/" + o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			key = kind + "/" + ns + "/" + o.GetName()
		}
		if ts := o.GetCreationTimestamp(); !ts.IsZero() {
			continue
		}
		t, ok := prev[key]
		if !ok {
			t = now
		}
		out[key] = t.UTC()
		o.SetCreationTimestamp(metav1.NewTime(t.UTC()))
	}
	return out
}
