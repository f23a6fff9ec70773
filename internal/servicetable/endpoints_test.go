package servicetable

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// sets is the endpoint selection of one entry, compactly.
type sets struct {
	Cluster, Local, All []string
	Has                 bool
}

func setsOf(sp *ServicePort) sets {
	return sets{Cluster: epStrings(sp.ClusterEndpoints), Local: epStrings(sp.LocalEndpoints), All: epStrings(sp.AllEndpoints), Has: sp.HasEndpoints}
}

func strs(s ...string) []string { return s }

// etpLocal makes the Service a NodePort Service with externalTrafficPolicy
// Local, so both the cluster and the local set are computed.
var etpLocal = withType(model.ServiceTypeNodePort, model.TrafficPolicyLocal)

func withNodePort(s *model.Service) { s.Ports[0].NodePort = 30080 }

func itpLocal(s *model.Service) { s.InternalTrafficPolicy = model.TrafficPolicyLocal }

// TestEndpointSelection covers which endpoints each set gets: conditions and
// their fallback, locality, topology hints, trafficDistribution, duplicates and
// families, against kube-proxy v1.36's EndpointSliceCache + CategorizeEndpoints.
func TestEndpointSelection(t *testing.T) {
	const (
		a1 = "192.168.1.10" // node1, zone-a (local)
		a2 = "192.168.1.11" // node1, zone-a (local)
		b1 = "192.168.2.10" // node2, zone-b
		b2 = "192.168.3.10" // node3, zone-a
	)
	tests := []struct {
		name   string
		svc    *model.Service
		slices []*model.EndpointSlice
		cfg    *NodeConfig
		want   sets
	}{{
		name: "ready endpoints only while any is ready",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", servingTerm), mep(b1, "node2", "zone-b", ready),
			mep(b2, "node3", "zone-a", notReady), mep(a2, "node1", "zone-a", servingOnly))},
		want: sets{Cluster: strs(b1 + ":8080"), All: strs(a1+":8080", a2+":8080", b1+":8080", b2+":8080"), Has: true},
	}, {
		name: "no ready endpoint: serving+terminating ones, not terminating-only or serving-only",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", servingTerm), mep(b1, "node2", "zone-b", termNotServing),
			mep(a2, "node1", "zone-a", servingOnly), mep(b2, "node3", "zone-a", servingTerm))},
		want: sets{Cluster: strs(a1+":8080", b2+":8080"), All: strs(a1+":8080", a2+":8080", b1+":8080", b2+":8080"), Has: true},
	}, {
		name: "nothing usable: no sets, HasEndpoints false, AllEndpoints still listed",
		svc:  svc("web", etpLocal, withNodePort),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", termNotServing), mep(b1, "node2", "zone-b", notReady))},
		want: sets{All: strs(a1+":8080", b1+":8080")},
	}, {
		name: "fallback per set: cluster has ready remote ones, local falls back to serving+terminating",
		svc:  svc("web", etpLocal, withNodePort),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", servingTerm), mep(a2, "node1", "zone-a", termNotServing),
			mep(b1, "node2", "zone-b", ready))},
		want: sets{Cluster: strs(b1 + ":8080"), Local: strs(a1 + ":8080"), All: strs(a1+":8080", a2+":8080", b1+":8080"), Has: true},
	}, {
		name: "fallback per set: local has a ready one, cluster keeps ready ones only",
		svc:  svc("web", etpLocal, withNodePort),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready), mep(a2, "node1", "zone-a", servingTerm), mep(b1, "node2", "zone-b", servingTerm))},
		want: sets{Cluster: strs(a1 + ":8080"), Local: strs(a1 + ":8080"), All: strs(a1+":8080", a2+":8080", b1+":8080"), Has: true},
	}, {
		name:   "internalTrafficPolicy Local without local endpoints: empty local set, HasEndpoints true (drop, not reject)",
		svc:    svc("web", itpLocal),
		slices: []*model.EndpointSlice{httpSlice("web", "w1", mep(b1, "node2", "zone-b", ready))},
		want:   sets{All: strs(b1 + ":8080"), Has: true},
	}, {
		name:   "no node name: nothing is local",
		svc:    svc("web", etpLocal, withNodePort),
		cfg:    &NodeConfig{Zone: "zone-a"},
		slices: []*model.EndpointSlice{httpSlice("web", "w1", mep(a1, "", "zone-a", ready))},
		want:   sets{Cluster: strs(a1 + ":8080"), All: strs(a1 + ":8080"), Has: true},
	}, {
		name: "zone hints on every ready endpoint, one for this zone: same zone",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, hintZones("zone-a")), mep(b1, "node2", "zone-b", ready, hintZones("zone-b")),
			mep(b2, "node3", "zone-a", ready, hintZones("zone-a", "zone-c")),
			mep(a2, "node1", "zone-a", notReady))}, // not ready: its missing hint does not count
		want: sets{Cluster: strs(a1+":8080", b2+":8080"), All: strs(a1+":8080", a2+":8080", b1+":8080", b2+":8080"), Has: true},
	}, {
		name: "zone hints with one ready endpoint missing its hint: all endpoints",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, hintZones("zone-a")), mep(b1, "node2", "zone-b", ready))},
		want: sets{Cluster: strs(a1+":8080", b1+":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "zone hints that do not name this node's zone: all endpoints",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, hintZones("zone-b")), mep(b1, "node2", "zone-b", ready, hintZones("zone-b")))},
		want: sets{Cluster: strs(a1+":8080", b1+":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "zone hints on a node without zone: all endpoints",
		svc:  svc("web"),
		cfg:  &NodeConfig{NodeName: "node1"},
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, hintZones("zone-a")), mep(b1, "node2", "zone-b", ready, hintZones("zone-b")))},
		want: sets{Cluster: strs(a1+":8080", b1+":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "topology narrows ready endpoints only; terminating fallback ignores hints",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", servingTerm, hintZones("zone-a")), mep(b1, "node2", "zone-b", servingTerm, hintZones("zone-b")))},
		want: sets{Cluster: strs(a1+":8080", b1+":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "node hints on every ready endpoint, one for this node: same node (before zone)",
		svc:  svc("web", func(s *model.Service) { s.TrafficDistribution = "PreferSameNode" }),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, hintNodes("node1"), hintZones("zone-a")),
			mep(b2, "node3", "zone-a", ready, hintNodes("node3"), hintZones("zone-a")),
			mep(b1, "node2", "zone-b", ready, hintNodes("node2"), hintZones("zone-b")))},
		want: sets{Cluster: strs(a1 + ":8080"), All: strs(a1+":8080", b1+":8080", b2+":8080"), Has: true},
	}, {
		name: "node hints not naming this node: zone hints apply",
		svc:  svc("web", func(s *model.Service) { s.TrafficDistribution = "PreferSameNode" }),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(b2, "node3", "zone-a", ready, hintNodes("node3"), hintZones("zone-a")),
			mep(b1, "node2", "zone-b", ready, hintNodes("node2"), hintZones("zone-b")))},
		want: sets{Cluster: strs(b2 + ":8080"), All: strs(b1+":8080", b2+":8080"), Has: true},
	}, {
		name: "node hints missing on one ready endpoint: zone hints apply",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, hintNodes("node1"), hintZones("zone-a")),
			mep(b2, "node3", "zone-a", ready, hintZones("zone-a")),
			mep(b1, "node2", "zone-b", ready, hintNodes("node2"), hintZones("zone-b")))},
		want: sets{Cluster: strs(a1+":8080", b2+":8080"), All: strs(a1+":8080", b1+":8080", b2+":8080"), Has: true},
	}, {
		name: "trafficDistribution without hints changes nothing (kube-proxy reads hints only)",
		svc:  svc("web", func(s *model.Service) { s.TrafficDistribution = "PreferClose" }),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready), mep(b1, "node2", "zone-b", ready))},
		want: sets{Cluster: strs(a1+":8080", b1+":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "PreferSameZone with its hints: same zone",
		svc:  svc("web", func(s *model.Service) { s.TrafficDistribution = "PreferSameZone" }),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, hintZones("zone-a")), mep(b1, "node2", "zone-b", ready, hintZones("zone-b")))},
		want: sets{Cluster: strs(a1 + ":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "externalTrafficPolicy Local: the local set ignores topology, the short-circuit set uses it",
		svc:  svc("web", etpLocal, withNodePort),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, hintZones("zone-b")),
			mep(b1, "node2", "zone-b", ready, hintZones("zone-a")))},
		want: sets{Cluster: strs(b1 + ":8080"), Local: strs(a1 + ":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "internalTrafficPolicy Local: hints ignored",
		svc:  svc("web", itpLocal),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, hintZones("zone-b")), mep(b1, "node2", "zone-b", ready, hintZones("zone-a")))},
		want: sets{Local: strs(a1 + ":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "duplicates across slices: once, non-terminating preferred wherever it is",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{
			httpSlice("web", "w1", mep(a1, "node1", "zone-a", servingTerm), mep(b1, "node2", "zone-b", ready)),
			httpSlice("web", "w2", mep(a1, "node1", "zone-a", ready), mep(b1, "node2", "zone-b", ready)),
		},
		want: sets{Cluster: strs(a1+":8080", b1+":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "slices that do not count: other family, headless label, other port name, other protocol, port 0",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{
			httpSlice("web", "w1", mep(a1, "node1", "zone-a", ready)),
			slice("web", "w-v6", ipfamily.IPv6, []model.EndpointPort{eport("http", model.ProtocolTCP, 8080)}, mep("fd00:192:168:1::10", "node1", "zone-a", ready)),
			func() *model.EndpointSlice {
				sl := httpSlice("web", "w-headless", mep(b1, "node2", "zone-b", ready))
				sl.Headless = true
				return sl
			}(),
			slice("web", "w-name", ipfamily.IPv4, []model.EndpointPort{eport("metrics", model.ProtocolTCP, 9090)}, mep(b1, "node2", "zone-b", ready)),
			slice("web", "w-proto", ipfamily.IPv4, []model.EndpointPort{eport("http", model.ProtocolUDP, 8080)}, mep(b1, "node2", "zone-b", ready)),
			slice("web", "w-zero", ipfamily.IPv4, []model.EndpointPort{eport("http", model.ProtocolTCP, 0)}, mep(b1, "node2", "zone-b", ready)),
		},
		want: sets{Cluster: strs(a1 + ":8080"), All: strs(a1 + ":8080"), Has: true},
	}, {
		name: "only an endpoint's first address counts; an address of the wrong family or none is ignored",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{httpSlice("web", "w1",
			mep(a1, "node1", "zone-a", ready, func(e *model.Endpoint) { e.Addresses = append(e.Addresses, ip(b2)) }),
			mep("fd00::1", "node2", "zone-b", ready),
			mep(b1, "node2", "zone-b", ready, func(e *model.Endpoint) { e.Addresses = nil }),
			mep("::ffff:"+b1, "node2", "zone-b", ready))}, // mapped: unmapped to ipfamily.IPv4
		want: sets{Cluster: strs(a1+":8080", b1+":8080"), All: strs(a1+":8080", b1+":8080"), Has: true},
	}, {
		name: "one slice port listed twice, different numbers: both (address, port) pairs",
		svc:  svc("web"),
		slices: []*model.EndpointSlice{slice("web", "w1", ipfamily.IPv4,
			[]model.EndpointPort{eport("http", model.ProtocolTCP, 8080), eport("http", model.ProtocolTCP, 8081)},
			mep(b1, "node2", "zone-b", ready))},
		want: sets{Cluster: strs(b1+":8080", b1+":8081"), All: strs(b1+":8080", b1+":8081"), Has: true},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testNode()
			if tc.cfg != nil {
				cfg = *tc.cfg
			}
			sp := mustOne(t, state(tc.svc, tc.slices...), cfg)
			if d := cmp.Diff(tc.want, setsOf(sp)); d != "" {
				t.Errorf("endpoint sets (-want +got):\n%s", d)
			}
			// kube-proxy's invariants: the sets exist only when used.
			if !sp.UsesClusterEndpoints() && sp.ClusterEndpoints != nil || !sp.UsesLocalEndpoints() && sp.LocalEndpoints != nil {
				t.Errorf("a set of an unused policy is filled: %+v", setsOf(sp))
			}
		})
	}
}

// TestEndpointSetsShareStorage: a set holding every endpoint shares
// AllEndpoints' array (one copy per entry, not two, in a table of every
// Service); a smaller set has its own, sized to fit.
func TestEndpointSetsShareStorage(t *testing.T) {
	shares := func(a, b []Endpoint) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }
	all := mustOne(t, state(svc("web"), httpSlice("web", "w1",
		mep("192.168.1.10", "node1", "zone-a", ready),
		mep("192.168.2.10", "node2", "zone-b", ready))), testNode())
	if !shares(all.ClusterEndpoints, all.AllEndpoints) {
		t.Error("all endpoints ready: ClusterEndpoints does not share AllEndpoints")
	}
	some := mustOne(t, state(svc("web", etpLocal, withNodePort), httpSlice("web", "w1",
		mep("192.168.1.10", "node1", "zone-a", ready),
		mep("192.168.2.10", "node2", "zone-b", servingTerm))), testNode())
	if shares(some.ClusterEndpoints, some.AllEndpoints) || shares(some.LocalEndpoints, some.AllEndpoints) {
		t.Error("a set of some endpoints shares AllEndpoints' array")
	}
	if len(some.ClusterEndpoints) != 1 || cap(some.ClusterEndpoints) != 1 || len(some.LocalEndpoints) != 1 {
		t.Errorf("cluster %v (cap %d), local %v: want one endpoint each, sized to fit",
			epStrings(some.ClusterEndpoints), cap(some.ClusterEndpoints), epStrings(some.LocalEndpoints))
	}
}

// TestEndpointFields checks the fields an endpoint carries into the table.
func TestEndpointFields(t *testing.T) {
	sp := mustOne(t, state(svc("web", etpLocal, withNodePort), httpSlice("web", "w1",
		mep("192.168.1.10", "node1", "zone-a", servingTerm),
		mep("192.168.2.10", "node2", "zone-b", ready))), testNode())
	want := []Endpoint{
		{Addr: ip("192.168.1.10"), Port: 8080, Local: true, Serving: true, Terminating: true, NodeName: "node1", Zone: "zone-a"},
		{Addr: ip("192.168.2.10"), Port: 8080, Ready: true, Serving: true, NodeName: "node2", Zone: "zone-b"},
	}
	if d := cmp.Diff(want, sp.AllEndpoints, cmpOpts); d != "" {
		t.Errorf("AllEndpoints (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, sp.ReachableEndpoints(), cmpOpts); d != "" {
		t.Errorf("ReachableEndpoints (-want +got):\n%s", d)
	}
	if got := want[1].String(); got != "192.168.2.10:8080" {
		t.Errorf("String() = %q", got)
	}
	if got := (Endpoint{Addr: ip("fd00::1"), Port: 80}).String(); got != "[fd00::1]:80" {
		t.Errorf("String() = %q", got)
	}
}

func TestServicePortPolicyHelpers(t *testing.T) {
	tests := []struct {
		name                          string
		sp                            ServicePort
		accessible, usesCluster, uses bool
	}{
		{"ClusterIP", ServicePort{}, false, true, false},
		{"internal Local", ServicePort{InternalPolicyLocal: true}, false, false, true},
		{"internal Local with NodePort", ServicePort{InternalPolicyLocal: true, NodePort: 30080}, true, true, true},
		{"internal Local with externalIP", ServicePort{InternalPolicyLocal: true, ExternalIPs: ips("172.26.236.200")}, true, true, true},
		{"external Local", ServicePort{ExternalPolicyLocal: true, LoadBalancerIPs: ips("172.26.236.180")}, true, true, true},
	}
	for _, tc := range tests {
		if got := tc.sp.ExternallyAccessible(); got != tc.accessible {
			t.Errorf("%s: ExternallyAccessible = %v", tc.name, got)
		}
		if got := tc.sp.UsesClusterEndpoints(); got != tc.usesCluster {
			t.Errorf("%s: UsesClusterEndpoints = %v", tc.name, got)
		}
		if got := tc.sp.UsesLocalEndpoints(); got != tc.uses {
			t.Errorf("%s: UsesLocalEndpoints = %v", tc.name, got)
		}
	}
	sp := ServicePort{
		ClusterEndpoints: []Endpoint{tep("192.168.2.10", 80, remote), tep("192.168.1.10", 80)},
		LocalEndpoints:   []Endpoint{tep("192.168.1.10", 80), tep("192.168.1.11", 80)},
	}
	if d := cmp.Diff(strs("192.168.1.10:80", "192.168.1.11:80", "192.168.2.10:80"), epStrings(sp.ReachableEndpoints())); d != "" {
		t.Errorf("ReachableEndpoints (-want +got):\n%s", d)
	}
	if (&ServicePort{}).ReachableEndpoints() != nil {
		t.Errorf("ReachableEndpoints of an empty entry is not nil")
	}
}
