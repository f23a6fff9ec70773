package model

import (
	"net/netip"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// EndpointSlice is the slim form of a discovery/v1 EndpointSlice. Service names the
// Service it belongs to (label kubernetes.io/service-name). Of the labels, only
// that one and service.kubernetes.io/headless are kept (as Service and Headless):
// a node agent holds every slice of the cluster, and a copy of each slice's label
// map (which the EndpointSlice controller copies from the Service) would cost more
// than the rest of the slice.
type EndpointSlice struct {
	Namespace   string
	Name        string
	Service     string
	AddressType ipfamily.Family // slices of type FQDN are not represented
	Ports       []EndpointPort
	Endpoints   []Endpoint
	// Headless is set when the slice carries the service.kubernetes.io/headless label.
	Headless bool
	// TriggerTime is the endpoints.kubernetes.io/last-change-trigger-time annotation,
	// used for network-programming latency; zero when absent.
	TriggerTime int64 // unix nanoseconds
}

// ServiceKey returns the key of the Service the slice belongs to.
func (s *EndpointSlice) ServiceKey() ServiceKey { return ServiceKey{s.Namespace, s.Service} }

// EndpointPort is one entry of an EndpointSlice's ports. Name matches the Service
// port's name ("" for a single unnamed port).
type EndpointPort struct {
	Name        string
	Protocol    Protocol
	Port        int32
	AppProtocol string
}

// Endpoint is one backend: its addresses, conditions and placement.
type Endpoint struct {
	Addresses []netip.Addr
	// Conditions as in discovery/v1; a nil Ready in the API means ready unless
	// terminating, and is converted so.
	Ready       bool
	Serving     bool
	Terminating bool
	Hostname    string
	NodeName    string
	Zone        string
	HintZones   []string
	HintNodes   []string
	TargetRef   *ObjectRef
}

// ObjectRef names the object behind an endpoint (usually a Pod).
type ObjectRef struct {
	Kind      string
	Namespace string
	Name      string
	UID       string
}

// ServiceEndpoint is one endpoint address with one port, as a data plane uses it.
type ServiceEndpoint struct {
	Addr     netip.Addr
	Port     int32
	Endpoint *Endpoint // the endpoint it came from: conditions, node, zone, hints
}

// EndpointsFor returns, for the Service port named portName, every (address, port)
// that the slices offer, deduplicated (an endpoint can appear in two slices while the
// controller moves it) and sorted by address then port. When the same address and
// port appear twice, the first in slice order wins, so the result is deterministic.
func EndpointsFor(slices []*EndpointSlice, portName string, proto Protocol) []ServiceEndpoint {
	type key struct {
		a netip.Addr
		p int32
	}
	seen := map[key]bool{}
	var out []ServiceEndpoint
	for _, sl := range slices {
		for _, p := range sl.Ports {
			if p.Name != portName || p.Protocol != proto {
				continue
			}
			for i := range sl.Endpoints {
				ep := &sl.Endpoints[i]
				for _, a := range ep.Addresses {
					k := key{a, p.Port}
					if seen[k] {
						continue
					}
					seen[k] = true
					out = append(out, ServiceEndpoint{Addr: a, Port: p.Port, Endpoint: ep})
				}
			}
		}
	}
	sortServiceEndpoints(out)
	return out
}
