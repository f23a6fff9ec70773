package model

import (
	"cmp"
	"iter"
	"slices"

	"github.com/svcnet/svcnet/internal/cowmap"
)

// ServiceState is one Service with the EndpointSlices that name it, sorted by slice
// name. Service is nil while slices exist for a Service not (or no longer) known.
type ServiceState struct {
	Service *Service
	Slices  []*EndpointSlice
}

// Endpoints returns the deduplicated, sorted endpoints of one of the Service's ports.
func (st *ServiceState) Endpoints(p ServicePort) []ServiceEndpoint {
	return EndpointsFor(st.Slices, p.Name, p.Protocol)
}

// Snapshot is an immutable view of the cluster at one revision. The zero value is
// not useful; snapshots come from a Store.
type Snapshot struct {
	// Revision increases by one with every published change.
	Revision uint64
	// Synced is set once the source has delivered its initial state (informer caches
	// synced, manifests loaded). Consumers should not program a data plane before.
	Synced bool

	// The maps share storage with the snapshots before and after (cowmap.Map).
	services *cowmap.Map[ServiceKey, *ServiceState]
	slices   *cowmap.Map[ServiceKey, *EndpointSlice] // keyed by the slice's own namespace/name
	nodes    *cowmap.Map[string, *Node]
	pods     *cowmap.Map[PodKey, *Pod]
	// loadBalancers are the keys of the Services of type LoadBalancer.
	loadBalancers *cowmap.Map[ServiceKey, struct{}]
}

func emptySnapshot() *Snapshot {
	return &Snapshot{
		services:      &cowmap.Map[ServiceKey, *ServiceState]{},
		slices:        &cowmap.Map[ServiceKey, *EndpointSlice]{},
		nodes:         &cowmap.Map[string, *Node]{},
		pods:          &cowmap.Map[PodKey, *Pod]{},
		loadBalancers: &cowmap.Map[ServiceKey, struct{}]{},
	}
}

// Service returns the state of the Service k, or nil when the Service is unknown.
func (s *Snapshot) Service(k ServiceKey) *ServiceState {
	st := s.services.Get(k)
	if st == nil || st.Service == nil {
		return nil
	}
	return st
}

// EachLoadBalancer yields the state of every Service of type LoadBalancer,
// in no order: for a reader on every change (an announcer of their IPs)
// at the cost of those Services alone.
func (s *Snapshot) EachLoadBalancer() iter.Seq[*ServiceState] {
	return func(yield func(*ServiceState) bool) {
		for k := range s.loadBalancers.All() {
			if !yield(s.services.Get(k)) {
				return
			}
		}
	}
}

// Services returns every known Service's state, sorted by key.
func (s *Snapshot) Services() []*ServiceState {
	out := make([]*ServiceState, 0, s.services.Len())
	for _, st := range s.services.All() {
		if st.Service != nil {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b *ServiceState) int { return CompareServiceKeys(a.Service.Key(), b.Service.Key()) })
	return out
}

// EndpointSlices returns every slice, also those of unknown Services, sorted by
// namespace/name.
func (s *Snapshot) EndpointSlices() []*EndpointSlice {
	out := make([]*EndpointSlice, 0, s.slices.Len())
	for _, sl := range s.slices.All() {
		out = append(out, sl)
	}
	slices.SortFunc(out, func(a, b *EndpointSlice) int {
		return CompareServiceKeys(ServiceKey{a.Namespace, a.Name}, ServiceKey{b.Namespace, b.Name})
	})
	return out
}

// Node returns the named Node or nil.
func (s *Snapshot) Node(name string) *Node { return s.nodes.Get(name) }

// Nodes returns every Node sorted by name.
func (s *Snapshot) Nodes() []*Node {
	out := make([]*Node, 0, s.nodes.Len())
	for _, n := range s.nodes.All() {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *Node) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Pod returns the Pod k or nil.
func (s *Snapshot) Pod(k PodKey) *Pod { return s.pods.Get(k) }

// Pods returns every Pod sorted by namespace/name.
func (s *Snapshot) Pods() []*Pod {
	out := make([]*Pod, 0, s.pods.Len())
	for _, p := range s.pods.All() {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Pod) int { return CompareServiceKeys(a.Key(), b.Key()) })
	return out
}

// CompareServiceKeys orders keys by namespace, then name.
func CompareServiceKeys(a, b ServiceKey) int {
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

func sortServiceEndpoints(eps []ServiceEndpoint) {
	slices.SortStableFunc(eps, func(a, b ServiceEndpoint) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
}

// SnapshotOf returns the snapshot of a new store holding svcs, then sls, in
// the order given, marked synced: the model of a fixed set of objects (test
// fixtures, benchmarks).
func SnapshotOf(svcs []*Service, sls []*EndpointSlice) *Snapshot {
	st := NewStore()
	st.Update(func(tx *Txn) {
		for _, s := range svcs {
			tx.SetService(s)
		}
		for _, sl := range sls {
			tx.SetEndpointSlice(sl)
		}
		tx.SetSynced(true)
	})
	return st.Snapshot()
}
