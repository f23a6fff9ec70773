//lint:file-ignore SA1019 kubectl get lists v1 Endpoints (get ep), as kubectl does

package kubectlget

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// endpointsOf returns r's v1 Endpoints: an API server's as listed, or,
// from the embedded control plane, which keeps none, what Kubernetes'
// endpoints controller keeps: one per Service with a selector (or with
// EndpointSlices of its own), named after it, its subsets the addresses
// of the Service's EndpointSlices grouped by their ports, ready ones as
// addresses, others as notReadyAddresses, sorted by IP.
func endpointsOf(r *controlplane.Result) []*corev1.Endpoints {
	if r.Endpoints != nil {
		return r.Endpoints
	}
	bySvc := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range r.EndpointSlices {
		key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
		bySvc[key] = append(bySvc[key], s)
	}
	var out []*corev1.Endpoints
	for _, svc := range r.Services {
		slices := bySvc[svc.Namespace+"/"+svc.Name]
		if svc.Spec.Type == corev1.ServiceTypeExternalName || (len(svc.Spec.Selector) == 0 && len(slices) == 0) {
			continue
		}
		out = append(out, &corev1.Endpoints{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"},
			ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, Labels: svc.Labels,
				CreationTimestamp: svc.CreationTimestamp},
			Subsets: subsetsOf(slices),
		})
	}
	return out
}

// subsetsOf groups the endpoints of slices by their slices' ports.
func subsetsOf(sls []*discoveryv1.EndpointSlice) []corev1.EndpointSubset {
	var subsets []corev1.EndpointSubset
	for _, s := range sls {
		var ports []corev1.EndpointPort
		for _, p := range s.Ports {
			ep := corev1.EndpointPort{}
			if p.Name != nil {
				ep.Name = *p.Name
			}
			if p.Port != nil {
				ep.Port = *p.Port
			}
			if p.Protocol != nil {
				ep.Protocol = *p.Protocol
			}
			ports = append(ports, ep)
		}
		i := slices.IndexFunc(subsets, func(ss corev1.EndpointSubset) bool { return slices.Equal(ss.Ports, ports) })
		if i < 0 {
			subsets = append(subsets, corev1.EndpointSubset{Ports: ports})
			i = len(subsets) - 1
		}
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				addr := corev1.EndpointAddress{IP: a, NodeName: e.NodeName, TargetRef: e.TargetRef}
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					subsets[i].Addresses = append(subsets[i].Addresses, addr)
				} else {
					subsets[i].NotReadyAddresses = append(subsets[i].NotReadyAddresses, addr)
				}
			}
		}
	}
	for i := range subsets {
		byIP := func(a, b corev1.EndpointAddress) int { return strings.Compare(a.IP, b.IP) }
		slices.SortFunc(subsets[i].Addresses, byIP)
		slices.SortFunc(subsets[i].NotReadyAddresses, byIP)
	}
	return slices.DeleteFunc(subsets, func(ss corev1.EndpointSubset) bool {
		return len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0
	})
}
