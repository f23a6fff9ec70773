package model

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TriggerTimeAnnotation is set by the endpoint controllers to the time of the change
// that caused the slice's last update.
const TriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// EndpointSliceFromAPI converts a discovery/v1 EndpointSlice. ok is false for slices
// svcnet does not represent (address type FQDN, or no service-name label). Endpoint
// conditions follow the API's rules for unset fields: ready is true unless terminating,
// serving defaults to ready, terminating to false.
func EndpointSliceFromAPI(in *discoveryv1.EndpointSlice) (sl *EndpointSlice, ok bool, err error) {
	svc := in.Labels[discoveryv1.LabelServiceName]
	fam, known := ipfamily.Parse(string(in.AddressType))
	if svc == "" || !known {
		return nil, false, nil
	}
	out := &EndpointSlice{
		Namespace:   in.Namespace,
		Name:        in.Name,
		Service:     svc,
		AddressType: fam,
	}
	_, out.Headless = in.Labels[LabelHeadless]
	if t, err := time.Parse(time.RFC3339Nano, in.Annotations[TriggerTimeAnnotation]); err == nil {
		out.TriggerTime = t.UnixNano()
	}
	for _, p := range in.Ports {
		ep := EndpointPort{Protocol: ProtocolTCP}
		if p.Name != nil {
			ep.Name = *p.Name
		}
		if p.Protocol != nil {
			ep.Protocol = Protocol(*p.Protocol)
		}
		if p.Port != nil {
			ep.Port = *p.Port
		}
		if p.AppProtocol != nil {
			ep.AppProtocol = *p.AppProtocol
		}
		out.Ports = append(out.Ports, ep)
	}
	for i, e := range in.Endpoints {
		ep, err := endpointFromAPI(e)
		if err != nil {
			return nil, false, fmt.Errorf("endpointslice %s/%s: endpoints[%d]: %w", in.Namespace, in.Name, i, err)
		}
		out.Endpoints = append(out.Endpoints, ep)
	}
	return out, true, nil
}

func endpointFromAPI(e discoveryv1.Endpoint) (Endpoint, error) {
	var ep Endpoint
	for i, a := range e.Addresses {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return ep, fmt.Errorf("addresses[%d]: %w", i, err)
		}
		ep.Addresses = append(ep.Addresses, ip)
	}
	c := e.Conditions
	ep.Terminating = c.Terminating != nil && *c.Terminating
	ep.Ready = c.Ready == nil && !ep.Terminating || c.Ready != nil && *c.Ready
	ep.Serving = ep.Ready
	if c.Serving != nil {
		ep.Serving = *c.Serving
	}
	if e.Hostname != nil {
		ep.Hostname = *e.Hostname
	}
	if e.NodeName != nil {
		ep.NodeName = *e.NodeName
	}
	if e.Zone != nil {
		ep.Zone = *e.Zone
	}
	if h := e.Hints; h != nil {
		for _, z := range h.ForZones {
			ep.HintZones = append(ep.HintZones, z.Name)
		}
		for _, n := range h.ForNodes {
			ep.HintNodes = append(ep.HintNodes, n.Name)
		}
	}
	if r := e.TargetRef; r != nil {
		ep.TargetRef = objectRef(r)
	}
	return ep, nil
}

func objectRef(r *corev1.ObjectReference) *ObjectRef {
	return &ObjectRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: string(r.UID)}
}
