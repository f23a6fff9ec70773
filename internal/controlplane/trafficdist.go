package controlplane

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// hintsEnabled is true when the topology annotation asks for topology-aware hints
// (the deprecated annotation wins when both are set).
func hintsEnabled(annotations map[string]string) bool {
	val, ok := annotations[annotationTopologyAwareHints]
	if !ok {
		if val, ok = annotations[annotationTopologyMode]; !ok {
			return false
		}
	}
	return val == "Auto" || val == "auto"
}

// applyTrafficDistribution sets hints as the controller's trafficdist heuristic
// does for spec.trafficDistribution PreferClose, PreferSameZone (a ready endpoint
// is hinted for its own zone) and PreferSameNode (also for its own node). With
// the topology annotation set, the controller's topology cache would compute
// proportional hints instead; that needs Node CPU capacity and is not done here,
// so such slices carry no hints.
func applyTrafficDistribution(svc *corev1.Service, slices []*discoveryv1.EndpointSlice) {
	td := svc.Spec.TrafficDistribution
	if td == nil || hintsEnabled(svc.Annotations) {
		return
	}
	sameNode := *td == corev1.ServiceTrafficDistributionPreferSameNode
	if !sameNode && *td != corev1.ServiceTrafficDistributionPreferClose && *td != corev1.ServiceTrafficDistributionPreferSameZone {
		return
	}
	for _, s := range slices {
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
				continue
			}
			var h discoveryv1.EndpointHints
			if ep.Zone != nil {
				h.ForZones = []discoveryv1.ForZone{{Name: *ep.Zone}}
			}
			if ep.NodeName != nil && sameNode {
				h.ForNodes = []discoveryv1.ForNode{{Name: *ep.NodeName}}
			}
			if h.ForZones != nil || h.ForNodes != nil {
				ep.Hints = &h
			}
		}
	}
}
