package nftables

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

var (
	ip   = netip.MustParseAddr
	cidr = netip.MustParsePrefix
)

func testNode() servicetable.NodeConfig {
	return servicetable.NodeConfig{
		NodeName:          "node1",
		NodePortAddresses: []netip.Addr{ip("172.26.236.177"), ip("127.0.0.1"), ip("fd00:26:236::177")},
		ClusterCIDRs:      []netip.Prefix{cidr("192.168.0.0/16"), cidr("fd00:192:168::/56")},
	}
}

func ep(addr string, port uint16, local bool) servicetable.Endpoint {
	e := servicetable.Endpoint{Addr: ip(addr), Port: port, Local: local, Ready: true, Serving: true}
	if local {
		e.NodeName = "node1"
	} else {
		e.NodeName = "node2"
	}
	return e
}

// sp builds a ClusterIP Service port with cluster endpoints eps.
func sp(ns, name, port string, proto model.Protocol, cip string, p uint16, eps ...servicetable.Endpoint) *servicetable.ServicePort {
	s := &servicetable.ServicePort{
		Name:     servicetable.PortName{Namespace: ns, Name: name, Port: port, Protocol: proto},
		Protocol: proto,
		Port:     p,
	}
	s.ID = fmt.Sprintf("%s/%s:%s/%s", ns, name, port, proto)
	if cip != "" {
		s.ClusterIP = ip(cip)
		s.Frontends = append(s.Frontends, servicetable.Frontend{Kind: servicetable.FrontendClusterIP, Addr: s.ClusterIP, Port: p})
	}
	s.Family = ipfamily.Of(s.ClusterIP)
	setEndpoints(s, eps...)
	return s
}

func setEndpoints(s *servicetable.ServicePort, eps ...servicetable.Endpoint) {
	s.ClusterEndpoints = eps
	s.AllEndpoints = eps
	s.LocalEndpoints = nil
	for _, e := range eps {
		if e.Local {
			s.LocalEndpoints = append(s.LocalEndpoints, e)
		}
	}
	s.HasEndpoints = len(eps) > 0
}

func withNodePort(s *servicetable.ServicePort, np uint16, node servicetable.NodeConfig) *servicetable.ServicePort {
	s.NodePort = np
	for _, a := range node.NodePortAddresses {
		if !a.IsLoopback() && ipfamily.Of(a) == s.Family {
			s.Frontends = append(s.Frontends, servicetable.Frontend{Kind: servicetable.FrontendNodePort, Addr: a, Port: np})
		}
	}
	return s
}

func withLB(s *servicetable.ServicePort, lb string, ranges ...string) *servicetable.ServicePort {
	s.LoadBalancerIPs = append(s.LoadBalancerIPs, ip(lb))
	s.Frontends = append(s.Frontends, servicetable.Frontend{Kind: servicetable.FrontendLoadBalancer, Addr: ip(lb), Port: s.Port})
	for _, r := range ranges {
		s.SourceRanges = append(s.SourceRanges, cidr(r))
	}
	return s
}

func withExternalIP(s *servicetable.ServicePort, a string) *servicetable.ServicePort {
	s.ExternalIPs = append(s.ExternalIPs, ip(a))
	s.Frontends = append(s.Frontends, servicetable.Frontend{Kind: servicetable.FrontendExternalIP, Addr: ip(a), Port: s.Port})
	return s
}

// featureTable has one Service port per feature row of kube-proxy's table.
func featureTable() *servicetable.Table {
	n := testNode()
	e1, e2, e3 := ep("192.168.1.10", 80, true), ep("192.168.2.10", 80, false), ep("192.168.3.10", 80, false)
	ports := []*servicetable.ServicePort{
		sp("default", "clusterip", "http", model.ProtocolTCP, "10.96.0.20", 80, e1, e2, e3),
		withNodePort(sp("default", "nodeport", "", model.ProtocolTCP, "10.96.0.21", 80, e1, e2), 30080, n),
		withLB(withNodePort(sp("default", "lb", "http", model.ProtocolTCP, "10.96.0.22", 80, e1, e2), 30081, n), "172.26.236.180", "172.26.236.0/24"),
		withExternalIP(sp("default", "extip", "", model.ProtocolUDP, "10.96.0.23", 53, ep("192.168.2.11", 5353, false)), "172.26.236.190"),
		sp("default", "noeps", "", model.ProtocolTCP, "10.96.0.24", 80),
		sp("default", "sctp", "", model.ProtocolSCTP, "10.96.0.25", 9999, ep("192.168.2.12", 9999, false)),
		sp("default", "v6", "", model.ProtocolTCP, "fd00:96::10", 80, ep("fd00:192:168:1::10", 80, true)),
	}
	etp := withLB(withNodePort(sp("default", "etp-local", "", model.ProtocolTCP, "10.96.0.26", 80, e1, e2), 30082, n), "172.26.236.181")
	etp.ExternalPolicyLocal = true
	etp.HealthCheckNodePort = 32000
	etpNone := withNodePort(sp("default", "etp-local-none", "", model.ProtocolTCP, "10.96.0.27", 80, e2), 30083, n)
	etpNone.ExternalPolicyLocal = true
	itp := sp("default", "itp-local", "", model.ProtocolTCP, "10.96.0.28", 80, e1, e2)
	itp.InternalPolicyLocal = true
	itpNone := sp("default", "itp-local-none", "", model.ProtocolTCP, "10.96.0.29", 80, e2)
	itpNone.InternalPolicyLocal = true
	aff := sp("default", "affinity", "", model.ProtocolTCP, "10.96.0.30", 80, e1, e2)
	aff.AffinityTimeout = 10800 * time.Second
	ports = append(ports, etp, etpNone, itp, itpNone, aff)
	t := &servicetable.Table{Node: n, Ports: ports}
	sortPorts(t)
	return t
}

func sortPorts(t *servicetable.Table) {
	for i := range t.Ports {
		for j := i + 1; j < len(t.Ports); j++ {
			if t.Ports[j].ID < t.Ports[i].ID {
				t.Ports[i], t.Ports[j] = t.Ports[j], t.Ports[i]
			}
		}
	}
}
