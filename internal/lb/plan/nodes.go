package plan

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/model"
)

// nodeView answers which node addresses a node-ip mode Service is reached on.
type nodeView struct {
	nodes []*corev1.Node // Ready, not excluded, sorted by name
	// readyOn maps a Service to the nodes that have a ready endpoint of it.
	readyOn map[model.ServiceKey]map[string]bool
}

func newNodeView(nodes []*corev1.Node, eps []*discoveryv1.EndpointSlice) *nodeView {
	v := &nodeView{readyOn: map[model.ServiceKey]map[string]bool{}}
	for _, n := range nodes {
		if n != nil && nodeReady(n) && !excluded(n) {
			v.nodes = append(v.nodes, n)
		}
	}
	slices.SortFunc(v.nodes, func(a, b *corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	for _, sl := range eps {
		if sl == nil {
			continue
		}
		name, ok := sl.Labels[discoveryv1.LabelServiceName]
		if !ok {
			continue
		}
		key := model.ServiceKey{Namespace: sl.Namespace, Name: name}
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil || *ep.NodeName == "" || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			if v.readyOn[key] == nil {
				v.readyOn[key] = map[string]bool{}
			}
			v.readyOn[key][*ep.NodeName] = true
		}
	}
	return v
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// excluded reports the label node.kubernetes.io/exclude-from-external-load-balancers,
// which the cloud service controller honours too.
func excluded(n *corev1.Node) bool {
	_, ok := n.Labels[corev1.LabelNodeExcludeBalancers]
	return ok
}

// ingress returns the node addresses svc is reached on: for every Ready node (with
// externalTrafficPolicy Local: every one with a ready endpoint of svc), its
// ExternalIP of each of svc's families, else its InternalIP of that family; sorted
// and without duplicates. None is an error wrapping ErrNoNodes.
func (v *nodeView) ingress(svc *corev1.Service) ([]corev1.LoadBalancerIngress, error) {
	key := model.ServiceKey{Namespace: svc.Namespace, Name: svc.Name}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	fams := families(svc)
	var ips []netip.Addr
	for _, n := range v.nodes {
		if local && !v.readyOn[key][n.Name] {
			continue
		}
		for _, f := range fams {
			if ip, ok := nodeAddress(n, f); ok {
				ips = append(ips, ip)
			}
		}
	}
	if len(ips) == 0 {
		if local {
			return nil, alloc.Reasonf(ErrNoNodes, "no Ready node has a ready endpoint of %s and an address of its families %v (externalTrafficPolicy Local)", key, fams)
		}
		return nil, alloc.Reasonf(ErrNoNodes, "no Ready node has an address of the families %v of %s", fams, key)
	}
	return vipIngress(sortedAddrs(ips)), nil
}

// nodeAddress returns the node's first ExternalIP of family f, else its first
// InternalIP of f.
func nodeAddress(n *corev1.Node, f ipfamily.Family) (netip.Addr, bool) {
	for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type != t {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ipfamily.Of(ip) == f {
				return ip.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}
