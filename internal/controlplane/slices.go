package controlplane

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// buildSlices returns every EndpointSlice of the cluster, sorted: the valid
// user-given ones, those the endpointslice controller makes for Services with a
// selector, and those the mirroring controller makes from the Endpoints of
// selector-less Services. A user-given slice labelled as managed by one of those
// controllers is dropped without error: the controller would delete it as not
// its own (it has no owner reference to the Service's UID) and make its own.
//
// The builder is left in in.sb: a Reconciler builds the slices of a Service
// added later with it.
func buildSlices(in *intake, svcs []*corev1.Service, pods []*corev1.Pod, nodes []*corev1.Node) []*discoveryv1.EndpointSlice {
	user := prepareAll(in, kindEndpointSlice, in.slices, prepareSlice, validateSlice)
	eps := prepareAll(in, kindEndpoints, in.endpoints, prepareEndpoints, validateEndpoints)
	b := &sliceBuilder{names: newSliceNames(), pods: newPodIndex(pods), nodes: map[string]*corev1.Node{}}
	in.sb = b
	for _, n := range nodes {
		b.nodes[n.Name] = n
	}
	var out []*discoveryv1.EndpointSlice
	for _, s := range user {
		switch s.Labels[discoveryv1.LabelManagedBy] {
		case controllerEndpointSlice, controllerEndpointSliceMirroring:
			continue
		}
		b.names.take(s.Namespace, s.Name)
		out = append(out, s)
	}
	byKey := map[string]*corev1.Service{}
	for _, svc := range svcs {
		byKey[serviceKey(svc)] = svc
		if svc.Spec.Selector != nil && svc.Spec.Type != corev1.ServiceTypeExternalName {
			out = append(out, b.forService(svc)...)
		}
	}
	for _, ep := range eps {
		if svc := byKey[ep.Namespace+"/"+ep.Name]; svc != nil && svc.Spec.Selector == nil {
			out = append(out, b.mirror(ep)...)
		}
	}
	sortObjects(out)
	return out
}
