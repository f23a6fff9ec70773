package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The IP plan per --ip-family: every address of the node network has its
// IPv6 twin with the same host number, the primary family comes first, and
// the nil Stack (a lab made before --ip-family) is IPv4.
func TestStackPlan(t *testing.T) {
	type plan struct {
		Name                                             string
		Client, Gateways, Node1, Node4, Control, DNS     string
		NodeNetworks, PodCIDRs2, PodNetworks, ServiceIPs string
	}
	of := func(s Stack) plan {
		return plan{Name: s.String(), Client: Join(s.ClientAddrs()), Gateways: Join(s.Gateways()), Node1: Join(s.NodeAddrs(1)),
			Node4: Join(s.NodeAddrs(4)), Control: Join(s.ControlAddrs()), DNS: Join(s.ClusterDNS()),
			NodeNetworks: Join(s.NodeNetworks()), PodCIDRs2: Join(s.PodCIDRs(2)), PodNetworks: Join(s.PodNetworks()),
			ServiceIPs: Join(s.ServiceRanges())}
	}
	for _, c := range []struct {
		flag string
		want plan
	}{
		{"", plan{"ipv4", "172.26.236.10", "172.26.236.1", "172.26.236.177", "172.26.236.200", "172.26.236.176", "10.96.0.10",
			"172.26.236.0/24", "192.168.2.0/24", "192.168.0.0/16", "10.96.0.0/12"}},
		{"ipv6", plan{"ipv6", "fd00:26:236::a", "fd00:26:236::1", "fd00:26:236::b1", "fd00:26:236::c8", "fd00:26:236::b0", "fd00:96::a",
			"fd00:26:236::/64", "fd00:192:168:2::/64", "fd00:192:168::/56", "fd00:96::/108"}},
		{"DUAL", plan{"dual", "172.26.236.10,fd00:26:236::a", "172.26.236.1,fd00:26:236::1", "172.26.236.177,fd00:26:236::b1",
			"172.26.236.200,fd00:26:236::c8", "172.26.236.176,fd00:26:236::b0", "10.96.0.10,fd00:96::a",
			"172.26.236.0/24,fd00:26:236::/64", "192.168.2.0/24,fd00:192:168:2::/64", "192.168.0.0/16,fd00:192:168::/56",
			"10.96.0.0/12,fd00:96::/108"}},
	} {
		s, err := ParseStack(c.flag)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.want, of(s)); d != "" {
			t.Errorf("--ip-family %q (-want +got):\n%s", c.flag, d)
		}
	}
	if d := cmp.Diff(of(Stack{4}), of(nil)); d != "" {
		t.Errorf("the nil Stack is not IPv4 (-ipv4 +nil):\n%s", d)
	}
	for i := 1; i <= MaxNodes; i++ {
		if c := PodCIDR6(i); !PodNetwork6.Contains(c.Addr()) || c.Bits() != 64 {
			t.Errorf("PodCIDR6(%d) = %s: not a /64 of %s", i, c, PodNetwork6)
		}
		if a := Twin6(NodeAddr(i)); !NodeNetwork6.Contains(a) {
			t.Errorf("node %d: %s not in %s", i, a, NodeNetwork6)
		}
	}
	if _, err := ParseStack("ipv5"); err == nil {
		t.Error(`--ip-family "ipv5" accepted`)
	}
}
