package controlplane

import (
	"errors"
	"net/netip"

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
			in.errs.add(e.idx, e.origin, kindIPAddressPool, p, err)
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
// gives every LoadBalancer Service of our class its IPs from the pools and writes
// them to status.loadBalancer.ingress.
//
// The current status it keeps (plan.Desired keeps valid current IPs) is the
// manifest's own status.loadBalancer when it has one (a published, resolved
// Service, or one whose status another controller wrote), else what the previous
// State recorded. A Service of another class keeps the manifest's status as is.
// Pending Services are reported in Result.Warnings; the allocations are recorded
// in state.
func assignLoadBalancers(in *intake, res *Result, prev State, state *State) {
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
	})
	for _, err := range out.PoolErrors {
		res.Errors = append(res.Errors, &ObjectError{Origin: controlPlaneOrigin, Kind: kindIPAddressPool, Name: poolOf(err), Err: err})
	}
	for _, r := range out.Results {
		key := r.Key.String()
		s := byKey[key]
		if s == nil {
			continue
		}
		s.Status.LoadBalancer = corev1.LoadBalancerStatus{Ingress: r.Ingress}
		if r.Err != nil {
			res.Warnings = append(res.Warnings, &ObjectError{Origin: in.originOf(kindService, key), Kind: kindService,
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

// poolOf returns the name of the pool an error of plan.Desired is about, or "".
func poolOf(err error) string {
	var pe *pool.Error
	if errors.As(err, &pe) {
		return pe.Pool
	}
	return ""
}
