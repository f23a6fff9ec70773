package userspace

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

var cidr = netip.MustParsePrefix

// testNode is node1 of the lab's IP plan: NodePorts on its addresses (the
// loopback one is dropped, as Build drops it), pods detected by the
// cluster CIDRs.
func testNode() servicetable.NodeConfig {
	return servicetable.NodeConfig{
		NodeName:          "node1",
		NodePortAddresses: []netip.Addr{netip.MustParseAddr("172.26.236.177"), netip.MustParseAddr("fd00:26:236::177")},
		ClusterCIDRs:      []netip.Prefix{cidr("192.168.0.0/16"), cidr("fd00:192:168::/56")},
	}
}

// tep returns a ready endpoint; local ones run on node1.
func tep(addr string, port uint16, local bool) servicetable.Endpoint {
	e := servicetable.Endpoint{Addr: netip.MustParseAddr(addr), Port: port, Local: local, Ready: true, Serving: true, NodeName: "node2"}
	if local {
		e.NodeName = "node1"
	}
	return e
}

// svc builds a ClusterIP Service port entry (cip "" for none) with cluster
// endpoints eps, its local ones in LocalEndpoints.
func svc(name, portName string, proto model.Protocol, cip string, p uint16, eps ...servicetable.Endpoint) *servicetable.ServicePort {
	s := &servicetable.ServicePort{
		Name:     servicetable.PortName{Namespace: "default", Name: name, Port: portName, Protocol: proto},
		Protocol: proto,
		Port:     p,
	}
	id := portName
	if id == "" {
		id = fmt.Sprint(p)
	}
	s.ID = fmt.Sprintf("default/%s:%s/%s", name, id, strings.ToLower(string(proto)))
	if cip != "" {
		s.ClusterIP = netip.MustParseAddr(cip)
		s.Frontends = append(s.Frontends, servicetable.Frontend{Kind: servicetable.FrontendClusterIP, Addr: s.ClusterIP, Port: p})
	}
	s.Family = ipfamily.Of(s.ClusterIP)
	setEndpoints(s, eps...)
	return s
}

func setEndpoints(s *servicetable.ServicePort, eps ...servicetable.Endpoint) {
	s.ClusterEndpoints, s.AllEndpoints, s.LocalEndpoints = eps, eps, nil
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
		if ipfamily.Of(a) == s.Family {
			s.Frontends = append(s.Frontends, servicetable.Frontend{Kind: servicetable.FrontendNodePort, Addr: a, Port: np})
		}
	}
	return s
}

func withLB(s *servicetable.ServicePort, lb string, ranges ...string) *servicetable.ServicePort {
	a := netip.MustParseAddr(lb)
	s.LoadBalancerIPs = append(s.LoadBalancerIPs, a)
	s.Frontends = append(s.Frontends, servicetable.Frontend{Kind: servicetable.FrontendLoadBalancer, Addr: a, Port: s.Port})
	for _, r := range ranges {
		s.SourceRanges = append(s.SourceRanges, cidr(r))
	}
	return s
}

func withExternalIP(s *servicetable.ServicePort, a string) *servicetable.ServicePort {
	ip := netip.MustParseAddr(a)
	s.ExternalIPs = append(s.ExternalIPs, ip)
	s.Frontends = append(s.Frontends, servicetable.Frontend{Kind: servicetable.FrontendExternalIP, Addr: ip, Port: s.Port})
	return s
}

func etpLocal(s *servicetable.ServicePort) *servicetable.ServicePort {
	s.ExternalPolicyLocal = true
	return s
}
func itpLocal(s *servicetable.ServicePort) *servicetable.ServicePort {
	s.InternalPolicyLocal = true
	return s
}

// table returns a service table of ports on node.
func table(node servicetable.NodeConfig, ports ...*servicetable.ServicePort) *servicetable.Table {
	t := &servicetable.Table{Node: node, Ports: ports}
	slices.SortFunc(t.Ports, func(a, b *servicetable.ServicePort) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return int(a.Family) - int(b.Family)
	})
	return t
}

// featureRow is one feature row of the plane: a Service port alone in a
// table.
type featureRow struct {
	name string
	tbl  *servicetable.Table
}

func featureRows() []featureRow {
	n := testNode()
	e1, e2 := tep("192.168.1.10", 8080, true), tep("192.168.2.10", 8080, false)
	row := func(name string, sp *servicetable.ServicePort) featureRow { return featureRow{name, table(n, sp)} }
	bridge := n
	bridge.ClusterCIDRs, bridge.PodInterface = nil, "cbr0"
	noNodeAddrs := n
	noNodeAddrs.NodePortAddresses = nil
	egress := n
	egress.Egress = servicetable.EgressMasquerade{
		PodCIDRs:           []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")},
		ServiceCIDRs:       []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		NonMasqueradeCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	}
	return []featureRow{
		{"egress-masquerade", table(egress, svc("egr", "", model.ProtocolTCP, "10.96.0.37", 80, e1))},
		row("clusterip", svc("web", "http", model.ProtocolTCP, "10.96.0.20", 80, e1, e2)),
		row("clusterip-udp", svc("dns", "dns", model.ProtocolUDP, "10.96.0.10", 53, tep("192.168.2.11", 53, false))),
		row("nodeport", withNodePort(svc("np", "", model.ProtocolTCP, "10.96.0.21", 80, e1, e2), 30080, n)),
		row("externalip", withExternalIP(svc("extip", "", model.ProtocolUDP, "10.96.0.23", 53, tep("192.168.2.11", 5353, false)), "203.0.113.10")),
		row("loadbalancer", withLB(withNodePort(svc("lb", "http", model.ProtocolTCP, "10.96.0.22", 80, e1, e2), 30081, n), "198.51.100.80")),
		row("loadbalancer-source-ranges", withLB(svc("lbsr", "", model.ProtocolTCP, "10.96.0.24", 80, e1, e2), "198.51.100.81", "172.26.236.0/24", "203.0.113.0/24")),
		row("loadbalancer-ip-in-source-ranges", withLB(svc("lbin", "", model.ProtocolTCP, "10.96.0.25", 80, e1), "198.51.100.82", "198.51.100.0/24")),
		row("external-policy-local", etpLocal(withLB(withNodePort(svc("etp", "", model.ProtocolTCP, "10.96.0.26", 80, e1, e2), 30082, n), "198.51.100.83"))),
		{"external-policy-local-bridge", table(bridge, etpLocal(withNodePort(svc("etpbr", "", model.ProtocolTCP, "10.96.0.27", 80, e1, e2), 30083, bridge)))},
		row("internal-policy-local", itpLocal(svc("itp", "", model.ProtocolTCP, "10.96.0.28", 80, e1, e2))),
		row("internal-policy-local-nodeport", itpLocal(withNodePort(svc("itpnp", "", model.ProtocolTCP, "10.96.0.29", 80, e1, e2), 30084, n))),
		row("no-endpoints", withNodePort(svc("noeps", "", model.ProtocolTCP, "10.96.0.30", 80), 30087, n)),
		row("no-endpoints-udp", svc("noepsudp", "", model.ProtocolUDP, "10.96.0.34", 53)),
		row("external-policy-local-no-local-endpoint", etpLocal(withNodePort(svc("etpnone", "", model.ProtocolTCP, "10.96.0.35", 80, e2), 30086, n))),
		row("internal-policy-local-no-local-endpoint", itpLocal(svc("itpnone", "", model.ProtocolTCP, "10.96.0.36", 80, e2))),
		row("affinity", func() *servicetable.ServicePort {
			s := svc("aff", "", model.ProtocolTCP, "10.96.0.31", 80, e1, e2)
			s.AffinityTimeout = 10800e9
			return s
		}()),
		row("sctp", svc("sctp", "", model.ProtocolSCTP, "10.96.0.32", 9999, tep("192.168.2.12", 9999, false))),
		row("ipv6", withNodePort(svc("v6", "", model.ProtocolTCP, "fd00:96::10", 80, tep("fd00:192:168:1::10", 8080, true)), 30085, n)),
		{"host-without-nodeport-addresses", table(noNodeAddrs, svc("nonode", "", model.ProtocolTCP, "10.96.0.33", 80, e1))},
	}
}

// fixedPorts is a PortFunc giving each proxy port the entries want a port
// from 40001 on, in table order: what a proxy would open, deterministic.
func fixedPorts(t *servicetable.Table) PortFunc {
	m := map[Key]uint16{}
	next := uint16(40001)
	for _, sp := range t.Ports {
		if !Served(sp) {
			continue
		}
		for _, w := range wants(sp) {
			m[w.key] = next
			next++
		}
	}
	return func(k Key) (uint16, bool) {
		p, ok := m[k]
		return p, ok
	}
}

func renderAll(tables []*nft.Table) string {
	var b strings.Builder
	for _, tb := range tables {
		b.WriteString(tb.Render())
	}
	return b.String()
}
