package iptables

import (
	"net/netip"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

var (
	ip   = netip.MustParseAddr
	cidr = netip.MustParsePrefix
)

func ips(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, ip(s))
	}
	return out
}

// testNode is node1 of the lab: NodePorts on its IPv4 and IPv6 addresses
// (the loopback one is dropped by servicetable.Build), pods in the cluster
// CIDRs.
func testNode() servicetable.NodeConfig {
	return servicetable.NodeConfig{
		NodeName:          "node1",
		NodePortAddresses: ips("172.26.236.177", "127.0.0.1", "fd00:26:236::177"),
		ClusterCIDRs:      []netip.Prefix{cidr("192.168.0.0/16"), cidr("fd00:192:168::/56")},
	}
}

// svc returns a ClusterIP Service default/<name> with one TCP port "http"
// 80 -> 8080, changed by the mutators.
func svc(name, clusterIP string, mut ...func(*model.Service)) *model.Service {
	s := &model.Service{
		Namespace:             "default",
		Name:                  name,
		Type:                  model.ServiceTypeClusterIP,
		ClusterIPs:            ips(clusterIP),
		IPFamilies:            []ipfamily.Family{ipfamily.Of(ip(clusterIP))},
		Ports:                 []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80, TargetPort: 8080}},
		InternalTrafficPolicy: model.TrafficPolicyCluster,
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func nodePort(np int32, etp model.TrafficPolicy) func(*model.Service) {
	return func(s *model.Service) {
		s.Type, s.ExternalTrafficPolicy = model.ServiceTypeNodePort, etp
		s.Ports[0].NodePort = np
	}
}

func loadBalancer(np int32, etp model.TrafficPolicy, lb string, ranges ...string) func(*model.Service) {
	return func(s *model.Service) {
		nodePort(np, etp)(s)
		s.Type = model.ServiceTypeLoadBalancer
		s.LoadBalancerIngress = []model.LoadBalancerIngress{{IP: ip(lb), IPMode: model.IPModeVIP}}
		for _, r := range ranges {
			s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, cidr(r))
		}
	}
}

// cond is a combination of EndpointSlice conditions.
type cond uint8

const (
	ready       cond = iota // ready, serving
	servingTerm             // serving, terminating
)

// ep is an endpoint at addr on node in condition c.
func ep(addr, node string, c cond) model.Endpoint {
	e := model.Endpoint{Addresses: ips(addr), NodeName: node, Serving: true}
	if c == ready {
		e.Ready = true
	} else {
		e.Terminating = true
	}
	return e
}

// slice is the EndpointSlice of Service name for its port "http" 8080/TCP.
func slice(name string, eps ...model.Endpoint) *model.EndpointSlice {
	return portSlice(name, "http", model.ProtocolTCP, 8080, eps...)
}

func portSlice(name, port string, proto model.Protocol, num int32, eps ...model.Endpoint) *model.EndpointSlice {
	fam := ipfamily.IPv4
	if len(eps) > 0 {
		fam = ipfamily.Of(eps[0].Addresses[0])
	}
	return &model.EndpointSlice{
		Namespace: "default", Name: name + "-" + fam.String(), Service: name, AddressType: fam,
		Ports:     []model.EndpointPort{{Name: port, Protocol: proto, Port: num}},
		Endpoints: eps,
	}
}

// build stores the objects and builds the node's service table.
func build(t *testing.T, node servicetable.NodeConfig, svcs []*model.Service, sls ...*model.EndpointSlice) *servicetable.Table {
	t.Helper()
	tbl := servicetable.Build(model.SnapshotOf(svcs, sls), node)
	if len(tbl.Errors) > 0 {
		t.Fatalf("fixture has skipped Services: %v", tbl.Errors)
	}
	return tbl
}

// Pod addresses: on node1 192.168.1.0/24, elsewhere 192.168.2.0/24 and up.
var (
	local1  = func() model.Endpoint { return ep("192.168.1.10", "node1", ready) }
	remote2 = func() model.Endpoint { return ep("192.168.2.10", "node2", ready) }
	remote3 = func() model.Endpoint { return ep("192.168.3.10", "node3", ready) }
)

// feature is one row of the feature table: the objects of one Service.
type feature struct {
	name   string
	svcs   []*model.Service
	slices []*model.EndpointSlice
}

// features has one Service per feature the nftables plane renders.
func features() []feature {
	return []feature{
		{"clusterip", []*model.Service{svc("web", "10.96.0.20")},
			[]*model.EndpointSlice{slice("web", local1(), remote2(), remote3())}},
		{"nodeport", []*model.Service{svc("np", "10.96.0.21", nodePort(30080, model.TrafficPolicyCluster))},
			[]*model.EndpointSlice{slice("np", local1(), remote2())}},
		{"loadbalancer", []*model.Service{svc("lb", "10.96.0.22", loadBalancer(30081, model.TrafficPolicyCluster, "172.26.236.180"))},
			[]*model.EndpointSlice{slice("lb", local1(), remote2())}},
		{"source-ranges", []*model.Service{svc("fw", "10.96.0.23", loadBalancer(30082, model.TrafficPolicyCluster, "172.26.236.181", "172.26.236.0/24", "203.0.113.0/25"))},
			[]*model.EndpointSlice{slice("fw", remote2())}},
		{"external-ip", []*model.Service{svc("dns", "10.96.0.24", func(s *model.Service) {
			s.Ports = []model.ServicePort{{Name: "dns", Protocol: model.ProtocolUDP, Port: 53, TargetPort: 5353}}
			s.ExternalIPs = ips("172.26.236.190")
		})}, []*model.EndpointSlice{portSlice("dns", "dns", model.ProtocolUDP, 5353, remote2())}},
		{"sctp", []*model.Service{svc("sctp", "10.96.0.25", func(s *model.Service) {
			s.Ports = []model.ServicePort{{Protocol: model.ProtocolSCTP, Port: 9999, TargetPort: 9999}}
		})}, []*model.EndpointSlice{portSlice("sctp", "", model.ProtocolSCTP, 9999, remote2())}},
		{"no-endpoints", []*model.Service{svc("none", "10.96.0.26", loadBalancer(30083, model.TrafficPolicyCluster, "172.26.236.182"), func(s *model.Service) {
			s.ExternalIPs = ips("172.26.236.191")
		})}, nil},
		{"etp-local", []*model.Service{svc("etp", "10.96.0.27", loadBalancer(30084, model.TrafficPolicyLocal, "172.26.236.183"), func(s *model.Service) {
			s.HealthCheckNodePort = 32000
		})}, []*model.EndpointSlice{slice("etp", local1(), remote2())}},
		{"etp-local-none", []*model.Service{svc("etp-none", "10.96.0.28", loadBalancer(30085, model.TrafficPolicyLocal, "172.26.236.184"), func(s *model.Service) {
			s.HealthCheckNodePort = 32001
			s.ExternalIPs = ips("172.26.236.192")
		})}, []*model.EndpointSlice{slice("etp-none", remote2())}},
		{"itp-local", []*model.Service{svc("itp", "10.96.0.29", func(s *model.Service) {
			s.InternalTrafficPolicy = model.TrafficPolicyLocal
		})}, []*model.EndpointSlice{slice("itp", local1(), remote2())}},
		{"itp-local-none", []*model.Service{svc("itp-none", "10.96.0.30", func(s *model.Service) {
			s.InternalTrafficPolicy = model.TrafficPolicyLocal
		})}, []*model.EndpointSlice{slice("itp-none", remote2())}},
		{"itp-local-nodeport", []*model.Service{svc("itp-np", "10.96.0.31", nodePort(30086, model.TrafficPolicyCluster), func(s *model.Service) {
			s.InternalTrafficPolicy = model.TrafficPolicyLocal
		})}, []*model.EndpointSlice{slice("itp-np", remote2())}},
		{"affinity", []*model.Service{svc("sticky", "10.96.0.32", func(s *model.Service) {
			s.AffinityClientIP, s.AffinityTimeout = true, 10800*time.Second
		})}, []*model.EndpointSlice{slice("sticky", local1(), remote2())}},
		{"terminating", []*model.Service{svc("term", "10.96.0.33")},
			[]*model.EndpointSlice{slice("term", ep("192.168.2.11", "node2", servingTerm), ep("192.168.3.11", "node3", servingTerm))}},
		{"dual-stack", []*model.Service{svc("dual", "10.96.0.34", nodePort(30087, model.TrafficPolicyCluster), func(s *model.Service) {
			s.ClusterIPs = ips("10.96.0.34", "fd00:96::34")
			s.IPFamilies = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
		})}, []*model.EndpointSlice{slice("dual", local1(), remote2()),
			slice("dual", ep("fd00:192:168:1::10", "node1", ready), ep("fd00:192:168:2::10", "node2", ready))}},
	}
}

// featureTable is every feature's Service in one table.
func featureTable(t *testing.T, node servicetable.NodeConfig) *servicetable.Table {
	var svcs []*model.Service
	var sls []*model.EndpointSlice
	for _, f := range features() {
		svcs = append(svcs, f.svcs...)
		sls = append(sls, f.slices...)
	}
	return build(t, node, svcs, sls...)
}
