package userspace

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/sim"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// simTable is every feature row on testNode in one table.
func simTable() *servicetable.Table {
	var ports []*servicetable.ServicePort
	for _, r := range featureRows() {
		if r.tbl.Node.PodInterface == "" && len(r.tbl.Node.NodePortAddresses) > 0 {
			ports = append(ports, r.tbl.Ports...)
		}
	}
	return table(testNode(), ports...)
}

// node1's interfaces: eth0 on the node network, cbr0 the pods' bridge.
var ifaceAddrs = map[string][]netip.Addr{
	"eth0": {netip.MustParseAddr("172.26.236.177"), netip.MustParseAddr("fd00:26:236::177")},
	"cbr0": {netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("fd00:192:168:1::1")},
}

func ifaceAddr(name string, f ipfamily.Family) netip.Addr {
	for _, a := range ifaceAddrs[name] {
		if ipfamily.Of(a) == f {
			return a
		}
	}
	return netip.Addr{}
}

// TestSimulatedFeatureRows walks packets through the rendered tables in the
// packet simulator: each kind of traffic must reach the proxy port of the
// endpoint set the service table's policies choose (internalTrafficPolicy
// for ClusterIP traffic; externalTrafficPolicy for external traffic, with
// pod and node traffic short-circuited to the cluster set), on the address
// the kernel's redirect picks, or be dropped by the source ranges; a
// rejection names the destination it answers for, the original one for
// traffic arriving on an interface (rejected before any rewrite).
func TestSimulatedFeatureRows(t *testing.T) {
	tbl := simTable()
	ports := fixedPorts(tbl)
	s := sim.New(nil, Render(tbl, ports)...)
	ap := netip.MustParseAddrPort
	port := func(id string, fam ipfamily.Family, set Set) uint16 {
		p, ok := ports(Key{ID: id, Family: fam, Set: set})
		if !ok {
			t.Fatalf("no proxy port %s %s %s", id, fam, set)
		}
		return p
	}
	// proxyAt is the proxy port of id's set on addr: "ADDR:PORT".
	proxyAt := func(addr, id string, set Set) string {
		a := netip.MustParseAddr(addr)
		return netip.AddrPortFrom(a, port(id, ipfamily.Of(a), set)).String()
	}
	// to names the proxy port reached: "local ADDR:PORT".
	to := func(addr, id string, set Set) string { return "local " + proxyAt(addr, id, set) }
	// rejected names a rejection of kind answering for dst.
	rejected := func(kind, dst string) string { return "rejected " + kind + " at " + dst }
	pod, client, node := ap("192.168.1.5:40000"), ap("172.26.236.10:40000"), ap("172.26.236.177:40000")
	var local []netip.Addr
	for _, as := range ifaceAddrs {
		local = append(local, as...)
	}
	for _, tc := range []struct {
		name  string
		path  sim.Path
		iface string
		proto uint8
		src   netip.AddrPort
		dst   string
		want  string
	}{
		{"ClusterIP from a pod: redirected to the bridge's address", sim.PathPrerouting, "cbr0", nft.ProtoTCP, pod, "10.96.0.20:80", to("192.168.1.1", "default/web:http/tcp", SetCluster)},
		{"ClusterIP from outside", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "10.96.0.20:80", to("172.26.236.177", "default/web:http/tcp", SetCluster)},
		{"ClusterIP from the node: DNAT to the node address", sim.PathOutput, "", nft.ProtoTCP, node, "10.96.0.20:80", to("172.26.236.177", "default/web:http/tcp", SetCluster)},
		{"ClusterIP, UDP", sim.PathPrerouting, "cbr0", nft.ProtoUDP, pod, "10.96.0.10:53", to("192.168.1.1", "default/dns:dns/udp", SetCluster)},
		{"unknown port of a ClusterIP: rejected", sim.PathPrerouting, "cbr0", nft.ProtoTCP, pod, "10.96.0.20:81", rejected("tcp reset", "10.96.0.20:81")},
		{"unknown port of a ClusterIP from the node: rejected", sim.PathOutput, "", nft.ProtoUDP, node, "10.96.0.20:81", rejected("icmp port-unreachable", "10.96.0.20:81")},
		{"a ClusterIP's unknown port from outside: rejected", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "10.96.0.20:81", rejected("tcp reset", "10.96.0.20:81")},
		{"not a ClusterIP: routed on", sim.PathPrerouting, "cbr0", nft.ProtoTCP, pod, "10.96.15.15:80", "forwarded 10.96.15.15:80"},
		{"no endpoints, from a pod: rejected before the redirect", sim.PathPrerouting, "cbr0", nft.ProtoTCP, pod, "10.96.0.30:80", rejected("tcp reset", "10.96.0.30:80")},
		{"no endpoints, NodePort from outside: rejected before the redirect", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "172.26.236.177:30087", rejected("tcp reset", "172.26.236.177:30087")},
		{"no endpoints, from the node: rejected at the proxy port", sim.PathOutput, "", nft.ProtoTCP, node, "10.96.0.30:80", rejected("tcp reset", proxyAt("172.26.236.177", "default/noeps:80/tcp", SetCluster))},
		{"no endpoints, UDP: rejected before the redirect", sim.PathPrerouting, "eth0", nft.ProtoUDP, client, "10.96.0.34:53", rejected("icmp port-unreachable", "10.96.0.34:53")},
		{"ETP Local without a local endpoint, from outside: dropped", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "172.26.236.177:30086", "dropped"},
		{"ETP Local without a local endpoint, from a pod: cluster set", sim.PathPrerouting, "cbr0", nft.ProtoTCP, pod, "172.26.236.177:30086", to("192.168.1.1", "default/etpnone:80/tcp", SetCluster)},
		{"ITP Local without a local endpoint: dropped", sim.PathPrerouting, "cbr0", nft.ProtoTCP, pod, "10.96.0.36:80", "dropped"},
		{"NodePort from a client", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "172.26.236.177:30080", to("172.26.236.177", "default/np:80/tcp", SetCluster)},
		{"NodePort from the node", sim.PathOutput, "", nft.ProtoTCP, node, "172.26.236.177:30080", to("172.26.236.177", "default/np:80/tcp", SetCluster)},
		{"NodePort on 127.0.0.1: not a Service", sim.PathOutput, "", nft.ProtoTCP, ap("127.0.0.1:40000"), "127.0.0.1:30080", "local 127.0.0.1:30080"},
		{"NodePort on another node's address: not ours", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "172.26.236.178:30080", "forwarded 172.26.236.178:30080"},
		{"externalIP, UDP", sim.PathPrerouting, "eth0", nft.ProtoUDP, client, "203.0.113.10:53", to("172.26.236.177", "default/extip:53/udp", SetCluster)},
		{"LB IP", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "198.51.100.80:80", to("172.26.236.177", "default/lb:http/tcp", SetCluster)},
		{"LB IP from inside the source ranges", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "198.51.100.81:80", to("172.26.236.177", "default/lbsr:80/tcp", SetCluster)},
		{"LB IP from outside the source ranges: dropped", sim.PathPrerouting, "eth0", nft.ProtoTCP, ap("10.1.1.1:40000"), "198.51.100.81:80", "dropped"},
		{"LB IP from the node, outside the source ranges: dropped", sim.PathOutput, "", nft.ProtoTCP, ap("192.168.1.1:40000"), "198.51.100.81:80", "dropped"},
		{"LB IP from the node, LB IP in the ranges: let through", sim.PathOutput, "", nft.ProtoTCP, ap("192.168.1.1:40000"), "198.51.100.82:80", to("172.26.236.177", "default/lbin:80/tcp", SetCluster)},
		{"ETP Local from outside: local set", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "198.51.100.83:80", to("172.26.236.177", "default/etp:80/tcp", SetLocal)},
		{"ETP Local NodePort from outside: local set", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "172.26.236.177:30082", to("172.26.236.177", "default/etp:80/tcp", SetLocal)},
		{"ETP Local from a pod: short-circuit to the cluster set", sim.PathPrerouting, "cbr0", nft.ProtoTCP, pod, "198.51.100.83:80", to("192.168.1.1", "default/etp:80/tcp", SetCluster)},
		{"ETP Local from the node: short-circuit to the cluster set", sim.PathOutput, "", nft.ProtoTCP, node, "198.51.100.83:80", to("172.26.236.177", "default/etp:80/tcp", SetCluster)},
		{"ETP Local ClusterIP: cluster set", sim.PathPrerouting, "cbr0", nft.ProtoTCP, pod, "10.96.0.26:80", to("192.168.1.1", "default/etp:80/tcp", SetCluster)},
		{"ITP Local: local set", sim.PathPrerouting, "cbr0", nft.ProtoTCP, pod, "10.96.0.28:80", to("192.168.1.1", "default/itp:80/tcp", SetLocal)},
		{"ITP Local from the node: local set", sim.PathOutput, "", nft.ProtoTCP, node, "10.96.0.28:80", to("172.26.236.177", "default/itp:80/tcp", SetLocal)},
		{"ITP Local NodePort: cluster set", sim.PathPrerouting, "eth0", nft.ProtoTCP, client, "172.26.236.177:30084", to("172.26.236.177", "default/itpnp:80/tcp", SetCluster)},
		{"SCTP: not served, rejected", sim.PathPrerouting, "cbr0", nft.ProtoSCTP, pod, "10.96.0.32:9999", rejected("icmp port-unreachable", "10.96.0.32:9999")},
		{"IPv6 ClusterIP from outside", sim.PathPrerouting, "eth0", nft.ProtoTCP, ap("[fd00:26:236::10]:40000"), "[fd00:96::10]:80", to("fd00:26:236::177", "default/v6:80/tcp", SetCluster)},
		{"IPv6 ClusterIP from the node", sim.PathOutput, "", nft.ProtoTCP, ap("[fd00:26:236::177]:40000"), "[fd00:96::10]:80", to("fd00:26:236::177", "default/v6:80/tcp", SetCluster)},
		{"IPv6 NodePort", sim.PathPrerouting, "eth0", nft.ProtoTCP, ap("[fd00:26:236::10]:40000"), "[fd00:26:236::177]:30085", to("fd00:26:236::177", "default/v6:80/tcp", SetCluster)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := ap(tc.dst)
			ctx := sim.Context{LocalAddrs: local, Path: tc.path, InIface: tc.iface, IfaceAddr: ifaceAddr,
				EgressAddr: func(netip.Addr) netip.Addr { return ifaceAddr("eth0", ipfamily.Of(dst.Addr())) }}
			res, err := s.Run(ctx, sim.Packet{Family: ipfamily.Of(dst.Addr()), Proto: tc.proto, Src: tc.src, Dst: dst})
			if err != nil {
				t.Fatal(err)
			}
			got := "dropped"
			switch res.Verdict {
			case sim.Accepted:
				got = fmt.Sprintf("%s %s", res.Delivery, res.Final.Dst)
			case sim.Rejected:
				got = rejected(res.Reject.String(), res.Final.Dst.String())
			}
			if got != tc.want {
				var b strings.Builder
				for _, st := range res.Trace {
					fmt.Fprintf(&b, "   %s %s/%s[%d] %s: %s\n", st.Hook, st.Table, st.Chain, st.Rule, st.Action, st.Detail)
				}
				t.Fatalf("got %s, want %s\n%s", got, tc.want, b.String())
			}
		})
	}
}
