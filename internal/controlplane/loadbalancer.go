package controlplane

import (
	"errors"
	"math"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// kindIPAddressPool is svcnet lb's address pool (svcnet.io/v1alpha1, cluster-scoped).
const kindIPAddressPool = pool.Kind

// lbConfig is the embedded control plane's load-balancer class: it is the one
// LoadBalancer provider of a file-mode cluster, so a Service without a class is ours.
var lbConfig = plan.Config{Class: plan.DefaultClass, IsDefault: true}

// preparePools validates the given pools; an invalid one is reported and left out.
func preparePools(in *intake) []*pool.IPAddressPool {
	var out []*pool.IPAddressPool
	for _, e := range in.pools {
		p := e.obj
		preparePool(p)
		if err := validatePool(p); err != nil {
			in.errs.add(e.idx, e.origin, kindIPAddressPool, p, poolReason(err))
			continue
		}
		if p.UID == "" {
			p.UID = makeUID(kindIPAddressPool, "", p.Name)
		}
		out = append(out, p)
	}
	sortObjects(out)
	return out
}

// assignLoadBalancers does what svcnet lb controller does in a real cluster: it
// admits the pools (pool.Admit, against the Nodes' addresses and pod CIDRs and
// cfg's service CIDRs), gives every LoadBalancer Service of our class its IPs
// from the admitted ones and writes them to status.loadBalancer.ingress.
//
// A pool is established when prev records it with its current addresses; the
// others (new, or edited) are admitted after every established one, oldest
// first, so the pool being applied is the one refused when two conflict. A
// refused pool is an error of its own origin (as an admission webhook's
// refusal), left out of res.Pools; an admitted pool that holds reserved
// addresses is a warning. state.Pools records the admitted pools.
//
// The current status it keeps (plan.Desired keeps valid current IPs) is the
// manifest's own status.loadBalancer when it has one (a published, resolved
// Service, or one whose status another controller wrote), else what the previous
// State recorded. A Service of another class keeps the manifest's status as is.
// Pending Services are reported in Result.Warnings; the allocations are recorded
// in state.
func assignLoadBalancers(cfg Config, in *intake, res *Result, prev State, state *State, now time.Time) {
	byKey := map[string]*corev1.Service{}
	for _, s := range res.Services {
		key := serviceKey(s)
		byKey[key] = s
		given := in.lbStatus[key]
		switch {
		case len(given.Ingress) > 0:
			s.Status.LoadBalancer = *given.DeepCopy()
		case len(prev.Services[key].LoadBalancerIPs) > 0 && s.Spec.Type == corev1.ServiceTypeLoadBalancer:
			for _, ip := range prev.Services[key].LoadBalancerIPs {
				vip := corev1.LoadBalancerIPModeVIP
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip, IPMode: &vip})
			}
		}
	}
	// Node-ip pools hand out the nodes' own addresses, which follow the nodes:
	// only addresses from pools of addresses are allocations to keep.
	addressPools := map[string]bool{}
	for _, p := range res.Pools {
		addressPools[p.Name] = p.Spec.Mode != string(alloc.ModeNodeIP)
	}
	out := plan.Desired(lbConfig, plan.Input{
		Pools:          res.Pools,
		Services:       res.Services,
		Namespaces:     res.Namespaces,
		Nodes:          res.Nodes,
		EndpointSlices: res.EndpointSlices,
		ServiceCIDRs:   cfg.ServiceCIDRs,
		Established: func(_ *pool.IPAddressPool, parsed alloc.Pool) bool {
			rec, ok := prev.Pools[parsed.Name]
			return ok && slices.Equal(rec, rangeStrings(parsed.Ranges))
		},
	})
	recordPools(in, out.Pools, prev, state)
	admitted := map[string]bool{}
	for _, r := range out.Pools {
		admitted[r.Name] = r.Admitted
		e := in.poolEntry(r.Name)
		switch {
		case r.Err != nil:
			in.errs.add(e.idx, e.origin, kindIPAddressPool, e.obj, poolReason(r.Err))
		case r.Conflict != nil:
			res.Warnings = append(res.Warnings, &ObjectError{Origin: e.origin, Kind: kindIPAddressPool, Name: r.Name, Err: poolReason(r.Conflict)})
		}
	}
	res.Pools = slices.DeleteFunc(res.Pools, func(p *pool.IPAddressPool) bool { return !admitted[p.Name] })
	for _, r := range out.Pools {
		if i := slices.IndexFunc(res.Pools, func(p *pool.IPAddressPool) bool { return p.Name == r.Name }); i >= 0 && r.Admitted {
			res.Events = append(res.Events, poolEvent(res.Pools[i], r, now))
		}
	}
	for _, r := range out.Results {
		key := r.Key.String()
		s := byKey[key]
		if s == nil {
			continue
		}
		s.Status.LoadBalancer = corev1.LoadBalancerStatus{Ingress: r.Ingress}
		if ev, ok := serviceEvent(s, r, now); ok {
			res.Events = append(res.Events, ev)
		}
		if r.Err != nil {
			res.Warnings = append(res.Warnings, &ObjectError{Origin: in.serviceOrigin(key), Kind: kindService,
				Namespace: s.Namespace, Name: s.Name, Err: r.Err})
		}
		if a, ok := state.Services[key]; ok {
			a.LoadBalancerIPs = nil
			if addressPools[r.Pool] {
				for _, ing := range r.Ingress {
					if _, err := netip.ParseAddr(ing.IP); err == nil {
						a.LoadBalancerIPs = append(a.LoadBalancerIPs, ing.IP)
					}
				}
			}
			state.Services[key] = a
		}
	}
}

// recordPools sets state.Pools: the addresses of every admitted pool, and, for
// every other pool still given (refused, or invalid), its previous record.
func recordPools(in *intake, results []plan.PoolResult, prev State, state *State) {
	state.Pools = nil
	set := func(name string, rec []string) {
		if state.Pools == nil {
			state.Pools = map[string][]string{}
		}
		state.Pools[name] = rec
	}
	for _, e := range in.pools {
		if rec, ok := prev.Pools[e.obj.Name]; ok {
			set(e.obj.Name, rec)
		}
	}
	for _, r := range results {
		if r.Admitted {
			set(r.Name, rangeStrings(r.Pool.Ranges))
		}
	}
}

func rangeStrings(rs []alloc.Range) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// poolEntry returns the input entry of the pool name (the first, as duplicates
// are errors already).
func (in *intake) poolEntry(name string) entry[*pool.IPAddressPool] {
	for _, e := range in.pools {
		if e.obj.Name == name {
			return e
		}
	}
	return entry[*pool.IPAddressPool]{idx: math.MaxInt, origin: controlPlaneOrigin, obj: &pool.IPAddressPool{}}
}

// nodeIPPool reports whether a pool of mode nodeIP is given (valid or not:
// one that is valid needs the EndpointSlices).
func (in *intake) nodeIPPool() bool {
	for _, e := range in.pools {
		if e.obj.Spec.Mode == string(alloc.ModeNodeIP) {
			return true
		}
	}
	return false
}

// poolError is a *pool.Error worded for an ObjectError, which names the pool
// already: its message is the reason alone.
type poolError struct{ err *pool.Error }

func (e poolError) Error() string { return e.err.Reason() }
func (e poolError) Unwrap() error { return e.err }

// poolReason returns err as a poolError when it is a *pool.Error.
func poolReason(err error) error {
	var pe *pool.Error
	if errors.As(err, &pe) {
		return poolError{pe}
	}
	return err
}
