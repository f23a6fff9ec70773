package servicetable

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// TestNodeConfigPerFamily: local pod traffic detection and NodePort
// addresses as every data plane reads them, per family.
func TestNodeConfigPerFamily(t *testing.T) {
	p, a := netip.MustParsePrefix, netip.MustParseAddr
	n := NodeConfig{
		ClusterCIDRs:      []netip.Prefix{p("192.168.1.7/16"), p("10.0.0.0/8"), p("fd00:192:168::/56")},
		PodInterface:      "cbr0",
		NodePortAddresses: []netip.Addr{a("172.26.236.9"), a("127.0.0.1"), a("172.26.236.2"), a("172.26.236.9"), a("fd00::2"), a("::1")},
	}
	if got := n.LocalTraffic(ipfamily.IPv4); got != (LocalTraffic{CIDR: p("192.168.0.0/16")}) {
		t.Errorf("IPv4 local traffic %+v: want the first IPv4 cluster CIDR, masked", got)
	}
	if got := n.LocalTraffic(ipfamily.IPv6); got != (LocalTraffic{CIDR: p("fd00:192:168::/56")}) {
		t.Errorf("IPv6 local traffic %+v", got)
	}
	only4 := n
	only4.ClusterCIDRs = n.ClusterCIDRs[:1]
	if got := only4.LocalTraffic(ipfamily.IPv6); got != (LocalTraffic{}) {
		t.Errorf("IPv6 with only an IPv4 cluster CIDR: %+v, want no detection", got)
	}
	byIface := n
	byIface.ClusterCIDRs, byIface.PodInterfacePrefix = nil, true
	if got := byIface.LocalTraffic(ipfamily.IPv6); got != (LocalTraffic{Iface: "cbr0", IfacePrefix: true}) {
		t.Errorf("no cluster CIDRs: %+v, want the pod interface", got)
	}
	if got := n.NodePortAddrs(ipfamily.IPv4); !slices.Equal(got, []netip.Addr{a("172.26.236.2"), a("172.26.236.9")}) {
		t.Errorf("IPv4 NodePort addresses %v: want sorted, no loopback, no duplicates", got)
	}
	if got := n.NodePortAddrs(ipfamily.IPv6); !slices.Equal(got, []netip.Addr{a("fd00::2")}) {
		t.Errorf("IPv6 NodePort addresses %v", got)
	}
}
