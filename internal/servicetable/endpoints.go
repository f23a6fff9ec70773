package servicetable

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// candidate is one endpoint of a Service port with its topology hints.
type candidate struct {
	Endpoint
	hintZones []string
	hintNodes []string
}

// usableSlices returns the slices kube-proxy would see, sorted by name: slices
// labelled service.kubernetes.io/headless are ignored (kube-proxy's informer
// filters them out).
func usableSlices(in []*model.EndpointSlice) []*model.EndpointSlice {
	out := make([]*model.EndpointSlice, 0, len(in))
	for _, sl := range in {
		if sl != nil && !sl.Headless {
			out = append(out, sl)
		}
	}
	slices.SortStableFunc(out, func(a, b *model.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// gatherEndpoints returns every endpoint the slices of family fam offer for the
// Service port (portName, proto), sorted by address then port, as kube-proxy's
// EndpointSliceCache builds them (so not through model.EndpointsFor):
//   - slices of the other address type are ignored, and so are slice ports
//     with no number (0);
//   - only an endpoint's first address counts ("no semantics are defined for
//     additional addresses beyond the first, and kube-proxy does not look at
//     them", discovery/v1); one of the wrong family is ignored, and so is a
//     special one (loopback, unspecified, link-local, multicast: the apiserver
//     refuses them, and a DNAT there would reach the node's own services);
//   - an (address, port) listed twice (an endpoint moving between slices, or a
//     reused pod IP) is kept once, preferring a non-terminating one, then a
//     ready one, then a serving one, then the first in slice-name order. kube-
//     proxy prefers non-terminating and otherwise leaves the choice to map
//     order; the tie-breaks make it deterministic.
//
// An endpoint is local when cfg names a node and the endpoint's NodeName is it.
func gatherEndpoints(sls []*model.EndpointSlice, fam ipfamily.Family, portName string, proto model.Protocol, nodeName string) []candidate {
	idx := map[netip.AddrPort]int{}
	var out []candidate
	for _, sl := range sls {
		if sl.AddressType != fam {
			continue
		}
		for _, p := range sl.Ports {
			if p.Name != portName || p.Protocol != proto || p.Port <= 0 || p.Port > 65535 {
				continue
			}
			for i := range sl.Endpoints {
				ep := &sl.Endpoints[i]
				if len(ep.Addresses) == 0 {
					continue
				}
				a := ep.Addresses[0].Unmap()
				if special(a) || ipfamily.Of(a) != fam {
					continue
				}
				c := candidate{
					Endpoint: Endpoint{
						Addr: a, Port: uint16(p.Port),
						Local: nodeName != "" && ep.NodeName == nodeName,
						Ready: ep.Ready, Serving: ep.Serving, Terminating: ep.Terminating,
						NodeName: ep.NodeName, Zone: ep.Zone,
					},
					hintZones: ep.HintZones,
					hintNodes: ep.HintNodes,
				}
				k := netip.AddrPortFrom(a, c.Port)
				if j, dup := idx[k]; dup {
					if preferred(c.Endpoint, out[j].Endpoint) {
						out[j] = c
					}
					continue
				}
				idx[k] = len(out)
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b candidate) int { return compareEndpoints(a.Endpoint, b.Endpoint) })
	return out
}

// preferred reports whether duplicate c should replace old (see gatherEndpoints).
func preferred(c, old Endpoint) bool {
	if c.Terminating != old.Terminating {
		return !c.Terminating
	}
	if c.Ready != old.Ready {
		return c.Ready
	}
	return c.Serving && !old.Serving
}

// topologyMode is the topology narrowing kube-proxy applies to Cluster endpoints.
type topologyMode uint8

const (
	topologyNone topologyMode = iota
	topologySameZone
	topologySameNode
)

// topologyModeFromHints mirrors kube-proxy v1.36's topologyModeFromHints (with
// PreferSameTrafficDistribution, GA and locked on since 1.35):
//   - every ready endpoint has node hints and one is hinted for this node:
//     same node;
//   - else every ready endpoint has zone hints and one is hinted for this
//     node's zone: same zone;
//   - else (or no ready endpoint): none.
//
// spec.trafficDistribution is not consulted: it acts through the hints the
// EndpointSlice controller writes (forZones for PreferClose/PreferSameZone,
// forNodes and forZones for PreferSameNode).
func topologyModeFromHints(all []candidate, nodeName, zone string) topologyMode {
	hasReady, forNode, allNode, forZone, allZone := false, false, true, false, true
	for i := range all {
		c := &all[i]
		if !c.Ready {
			continue
		}
		hasReady = true
		if len(c.hintNodes) == 0 {
			allNode = false
		} else if nodeName != "" && slices.Contains(c.hintNodes, nodeName) {
			forNode = true
		}
		if len(c.hintZones) == 0 {
			allZone = false
		} else if zone != "" && slices.Contains(c.hintZones, zone) {
			forZone = true
		}
	}
	switch {
	case !hasReady:
		return topologyNone
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return topologyNone
}

func (c *candidate) availableFor(m topologyMode, nodeName, zone string) bool {
	switch m {
	case topologySameNode:
		return slices.Contains(c.hintNodes, nodeName)
	case topologySameZone:
		return slices.Contains(c.hintZones, zone)
	}
	return true
}

// categorize fills the entry's endpoint sets from all the port's endpoints, as
// kube-proxy's CategorizeEndpoints: ClusterEndpoints when UsesClusterEndpoints,
// LocalEndpoints when UsesLocalEndpoints, each ready first and else
// serving+terminating (separately); HasEndpoints when any endpoint anywhere is
// ready or serving+terminating. sp's policies and addresses must be set.
//
// A set that holds every endpoint shares AllEndpoints' array (the common case
// of a Service whose endpoints are all ready: one array instead of two, in a
// table that holds every Service of the cluster); the table is immutable, so
// sharing is safe.
func categorize(sp *ServicePort, all []candidate, cfg NodeConfig) {
	if len(all) == 0 {
		return
	}
	sp.AllEndpoints = make([]Endpoint, len(all))
	for i := range all {
		sp.AllEndpoints[i] = all[i].Endpoint
	}
	for i := range all {
		if all[i].Ready || all[i].Serving && all[i].Terminating {
			sp.HasEndpoints = true
			break
		}
	}
	servingTerminating := func(c *candidate) bool { return c.Serving && c.Terminating }
	if sp.UsesClusterEndpoints() {
		mode := topologyModeFromHints(all, cfg.NodeName, cfg.Zone)
		sp.ClusterEndpoints = filterCandidates(all, sp.AllEndpoints, func(c *candidate) bool {
			return c.Ready && c.availableFor(mode, cfg.NodeName, cfg.Zone)
		})
		// Topology is used only when some ready endpoint fits it, so an empty
		// set here means no ready endpoint anywhere.
		if sp.ClusterEndpoints == nil {
			sp.ClusterEndpoints = filterCandidates(all, sp.AllEndpoints, servingTerminating)
		}
	}
	if sp.UsesLocalEndpoints() {
		sp.LocalEndpoints = filterCandidates(all, sp.AllEndpoints, func(c *candidate) bool { return c.Local && c.Ready })
		if sp.LocalEndpoints == nil {
			sp.LocalEndpoints = filterCandidates(all, sp.AllEndpoints, func(c *candidate) bool { return c.Local && servingTerminating(c) })
		}
	}
}

// filterCandidates returns the endpoints of the candidates keep accepts, in
// order; nil when none, and eps itself (the endpoints of all the candidates,
// in order) when all.
func filterCandidates(all []candidate, eps []Endpoint, keep func(*candidate) bool) []Endpoint {
	n := 0
	for i := range all {
		if keep(&all[i]) {
			n++
		}
	}
	switch n {
	case 0:
		return nil
	case len(all):
		return eps
	}
	out := make([]Endpoint, 0, n)
	for i := range all {
		if keep(&all[i]) {
			out = append(out, all[i].Endpoint)
		}
	}
	return out
}

// compareEndpoints orders endpoints by address, then port.
func compareEndpoints(a, b Endpoint) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

// unionEndpoints returns the endpoints of a and b, each (address, port) once
// (the first seen), sorted; nil when both are empty.
func unionEndpoints(a, b []Endpoint) []Endpoint {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := make([]Endpoint, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.SortStableFunc(out, compareEndpoints)
	return slices.CompactFunc(out, func(x, y Endpoint) bool { return x.Addr == y.Addr && x.Port == y.Port })
}
