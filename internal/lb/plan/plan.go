// Package plan turns API objects into the desired status.loadBalancer of every
// Service whose status svcnet lb owns. Both LoadBalancer controllers call it: the
// kube-mode `svcnet lb controller` with informer contents, and the embedded
// file-mode control plane with its reconciled objects. It is pure and
// deterministic: it parses and admits the pools (internal/lb/pool: the newer of
// two overlapping pools, and a new pool holding a node's address, a pod CIDR or
// a service CIDR, are refused), converts the Services (annotations, families,
// ports, current status), runs the allocator (internal/lb/alloc) and, for
// node-ip pools, picks the nodes' addresses.
package plan

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/pool"
	"github.com/svcnet/svcnet/internal/model"
)

// DefaultClass is svcnet lb's spec.loadBalancerClass.
const DefaultClass = "svcnet.io/lb"

// Service annotations svcnet lb reads.
const (
	// AnnotationLoadBalancerIPs asks for IPs: comma-separated, at most one per
	// family (it replaces the deprecated spec.loadBalancerIP).
	AnnotationLoadBalancerIPs = "svcnet.io/loadBalancerIPs"
	// AnnotationAddressPool asks for a pool by name.
	AnnotationAddressPool = "svcnet.io/address-pool"
	// AnnotationAllowSharedIP is the sharing key: Services with the same key may
	// share an IP when their ports differ.
	AnnotationAllowSharedIP = "svcnet.io/allow-shared-ip"
)

// Config says which LoadBalancer Services are ours.
type Config struct {
	// Class is our spec.loadBalancerClass; "" means DefaultClass.
	Class string
	// IsDefault: a Service with no loadBalancerClass is ours too.
	IsDefault bool
}

// Ours reports whether a LoadBalancer Service of spec.loadBalancerClass class ("" for
// none) is ours: class is c.Class, or class is "" and c.IsDefault.
func (c Config) Ours(class string) bool {
	if class == "" {
		return c.IsDefault
	}
	return class == cmp.Or(c.Class, DefaultClass)
}

// Input is the cluster state Desired reads. Nil entries are skipped; names are
// unique per kind (for duplicates, the first in sorted order is used).
type Input struct {
	Pools          []*pool.IPAddressPool
	Services       []*corev1.Service
	Namespaces     []*corev1.Namespace
	Nodes          []*corev1.Node
	EndpointSlices []*discoveryv1.EndpointSlice
	// ServiceCIDRs are the cluster's Service networks; no pool may hand out
	// their addresses (nor the Nodes' addresses and pod CIDRs).
	ServiceCIDRs []netip.Prefix
	// Established reports whether this version of a pool (parsed is its
	// Parse output) was admitted before; see pool.Candidate. Nil means
	// pool.StatusAdmitted: the pool's own status says so (kube mode).
	Established func(p *pool.IPAddressPool, parsed alloc.Pool) bool
}

// ServiceResult is one Service's desired status.
type ServiceResult struct {
	Key model.ServiceKey
	// Ingress is the desired status.loadBalancer.ingress (IP and IPMode VIP,
	// sorted by IP), nil when the Service should have none.
	Ingress []corev1.LoadBalancerIngress
	// Pool is the pool the addresses came from, "" when none.
	Pool string
	// Err is why the Service is pending (Ingress nil); nil when it is assigned or
	// released. It wraps an alloc sentinel (alloc.ErrPoolExhausted, ...,
	// alloc.ErrInvalidRequest for an annotation that does not parse) or ErrNoNodes.
	Err error
}

// Output is Desired's result.
type Output struct {
	// Results are sorted by key. They hold exactly the Services whose status we
	// own: every type LoadBalancer Service of our class (assigned or pending), and
	// every Service of another type that still has status.loadBalancer.ingress
	// (desired nil: released on a type change, as the cloud service controller
	// does). A LoadBalancer Service of another class is absent.
	Results []ServiceResult
	// Pools is what became of each pool of the input, sorted by name.
	Pools []PoolResult
	// PoolErrors are the *pool.Error of every pool left out (invalid, or
	// refused by pool.Admit), sorted by pool name.
	PoolErrors []error
	// PoolConflicts are the *pool.Error (pool.ErrReserved) of every admitted
	// pool that holds reserved addresses, sorted by pool name.
	PoolConflicts []error
}

// PoolResult is what became of one IPAddressPool.
type PoolResult struct {
	Name string
	// Admitted: the pool serves. Pool is then what the allocator used (with
	// Excluded filled in).
	Admitted bool
	Pool     alloc.Pool
	// Err is why the pool was left out: a *pool.Error wrapping pool.ErrInvalid,
	// pool.ErrOverlap or pool.ErrReserved. Nil when admitted.
	Err error
	// Conflict, for an admitted pool, is a *pool.Error (pool.ErrReserved)
	// naming the reserved addresses it holds and no longer hands out.
	Conflict error
}

// Desired computes the desired status of every Service we own from in. Pending
// Services get nil Ingress, so a Service that loses its address (its pool is gone,
// an older Service holds its IP) has it cleared. Current ingress IPs that are still
// valid are kept (see alloc.Allocate), so the result is stable across calls and
// controller restarts.
func Desired(cfg Config, in Input) Output {
	var out Output
	pools := admitPools(in, &out)
	nsLabels := map[string]map[string]string{}
	for _, ns := range in.Namespaces {
		if ns != nil {
			if _, dup := nsLabels[ns.Name]; !dup {
				nsLabels[ns.Name] = ns.Labels
			}
		}
	}
	svcs := sortedServices(in.Services)
	var asvcs []alloc.Service
	pending := map[model.ServiceKey]error{}
	byKey := map[model.ServiceKey]*corev1.Service{}
	for _, svc := range svcs {
		key := model.ServiceKey{Namespace: svc.Namespace, Name: svc.Name}
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			if len(svc.Status.LoadBalancer.Ingress) > 0 {
				out.Results = append(out.Results, ServiceResult{Key: key})
			}
			continue
		}
		if !cfg.Ours(classOf(svc)) {
			continue
		}
		byKey[key] = svc
		as, err := toAlloc(svc, nsLabels[svc.Namespace])
		if err != nil {
			pending[key] = err
			continue
		}
		asvcs = append(asvcs, as)
	}
	res := alloc.Allocate(pools, asvcs)
	nodes := newNodeView(in.Nodes, in.EndpointSlices)
	for _, svc := range svcs {
		key := model.ServiceKey{Namespace: svc.Namespace, Name: svc.Name}
		if byKey[key] != svc {
			continue
		}
		r := ServiceResult{Key: key, Err: pending[key]}
		if err := res.Pending[key]; err != nil {
			r.Err = err
		}
		if as, ok := res.Assigned[key]; ok {
			r.Pool = as.Pool
			if as.Mode == alloc.ModeNodeIP {
				r.Ingress, r.Err = nodes.ingress(svc)
				if r.Err != nil {
					r.Pool = ""
				}
			} else {
				r.Ingress = vipIngress(as.IPs)
			}
		}
		out.Results = append(out.Results, r)
	}
	slices.SortStableFunc(out.Results, func(a, b ServiceResult) int { return compareKeys(a.Key, b.Key) })
	return out
}

func classOf(svc *corev1.Service) string {
	if svc.Spec.LoadBalancerClass == nil {
		return ""
	}
	return *svc.Spec.LoadBalancerClass
}

func compareKeys(a, b model.ServiceKey) int {
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// sortedServices returns the non-nil Services sorted by key, without later
// duplicates.
func sortedServices(in []*corev1.Service) []*corev1.Service {
	out := slices.DeleteFunc(slices.Clone(in), func(s *corev1.Service) bool { return s == nil })
	slices.SortStableFunc(out, func(a, b *corev1.Service) int {
		return compareKeys(model.ServiceKey{Namespace: a.Namespace, Name: a.Name}, model.ServiceKey{Namespace: b.Namespace, Name: b.Name})
	})
	return slices.CompactFunc(out, func(a, b *corev1.Service) bool { return a.Namespace == b.Namespace && a.Name == b.Name })
}
