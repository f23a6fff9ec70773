package servicetable

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// cmpOpts compares netip values by value.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	// Which tables came before is not the table's content.
	cmpopts.IgnoreFields(Table{}, "Seq", "Delta"),
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func ips(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, ip(s))
	}
	return out
}

func cidr(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// testNode is node1 of the lab, zone-a, serving NodePorts on its ipfamily.IPv4 and ipfamily.IPv6
// addresses; the loopback addresses in the list must be dropped.
func testNode() NodeConfig {
	return NodeConfig{
		NodeName:          "node1",
		Zone:              "zone-a",
		NodePortAddresses: ips("fd00:26:236::177", "127.0.0.1", "172.26.236.177", "::1"),
	}
}

// svc returns a ClusterIP Service default/<name> with one TCP port "http" 80 ->
// 8080, changed by the mutators.
func svc(name string, mut ...func(*model.Service)) *model.Service {
	s := &model.Service{
		Namespace:             "default",
		Name:                  name,
		Type:                  model.ServiceTypeClusterIP,
		ClusterIPs:            ips("10.96.0.20"),
		IPFamilies:            []ipfamily.Family{ipfamily.IPv4},
		Ports:                 []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80, TargetPort: 8080}},
		InternalTrafficPolicy: model.TrafficPolicyCluster,
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func withClusterIPs(a ...string) func(*model.Service) {
	return func(s *model.Service) { s.ClusterIPs = ips(a...) }
}

func withPorts(p ...model.ServicePort) func(*model.Service) {
	return func(s *model.Service) { s.Ports = p }
}

func withType(t model.ServiceType, etp model.TrafficPolicy) func(*model.Service) {
	return func(s *model.Service) { s.Type, s.ExternalTrafficPolicy = t, etp }
}

// cond is a combination of EndpointSlice conditions.
type cond uint8

const (
	ready          cond = iota // ready, serving
	notReady                   // neither
	servingTerm                // serving, terminating
	termNotServing             // terminating only
	servingOnly                // serving, not ready, not terminating
)

// mep returns a model endpoint at addr on node in zone with conditions c.
func mep(addr, node, zone string, c cond, mut ...func(*model.Endpoint)) model.Endpoint {
	e := model.Endpoint{Addresses: ips(addr), NodeName: node, Zone: zone}
	switch c {
	case ready:
		e.Ready, e.Serving = true, true
	case servingTerm:
		e.Serving, e.Terminating = true, true
	case termNotServing:
		e.Terminating = true
	case servingOnly:
		e.Serving = true
	}
	for _, m := range mut {
		m(&e)
	}
	return e
}

func hintZones(z ...string) func(*model.Endpoint) {
	return func(e *model.Endpoint) { e.HintZones = z }
}

func hintNodes(n ...string) func(*model.Endpoint) {
	return func(e *model.Endpoint) { e.HintNodes = n }
}

func eport(name string, proto model.Protocol, port int32) model.EndpointPort {
	return model.EndpointPort{Name: name, Protocol: proto, Port: port}
}

// slice returns an EndpointSlice default/<name> of Service default/<service>.
func slice(service, name string, fam ipfamily.Family, ports []model.EndpointPort, eps ...model.Endpoint) *model.EndpointSlice {
	return &model.EndpointSlice{Namespace: "default", Name: name, Service: service, AddressType: fam, Ports: ports, Endpoints: eps}
}

// httpSlice is a slice of ipfamily.IPv4 endpoints for port "http" 8080/TCP.
func httpSlice(service, name string, eps ...model.Endpoint) *model.EndpointSlice {
	return slice(service, name, ipfamily.IPv4, []model.EndpointPort{eport("http", model.ProtocolTCP, 8080)}, eps...)
}

// snapshot stores the objects, in the order given, and returns the snapshot.
func snapshot(t *testing.T, svcs []*model.Service, sls []*model.EndpointSlice) *model.Snapshot {
	t.Helper()
	return model.SnapshotOf(svcs, sls)
}

// state returns the ServiceState of one Service with its slices.
func state(s *model.Service, sls ...*model.EndpointSlice) *model.ServiceState {
	return &model.ServiceState{Service: s, Slices: sls}
}

// tep is a table endpoint: ready, serving, on node1 in zone-a unless changed.
func tep(addr string, port uint16, mut ...func(*Endpoint)) Endpoint {
	e := Endpoint{Addr: ip(addr), Port: port, Ready: true, Serving: true, NodeName: "node1", Zone: "zone-a", Local: true}
	for _, m := range mut {
		m(&e)
	}
	return e
}

// remote moves a table endpoint to node2 in zone-b.
func remote(e *Endpoint) { e.NodeName, e.Zone, e.Local = "node2", "zone-b", false }

// epStrings renders endpoints as "addr:port" for compact comparisons.
func epStrings(eps []Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.String())
	}
	return out
}

// mustOne builds st and returns its only entry, failing otherwise.
func mustOne(t *testing.T, st *model.ServiceState, cfg NodeConfig) *ServicePort {
	t.Helper()
	got, err := BuildService(st, cfg)
	if err != nil {
		t.Fatalf("BuildService: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("BuildService returned %d entries, want 1", len(got))
	}
	return got[0]
}
