package nodecluster

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// makeFabric makes the lab's fabric (topology.MakeFabric: a bridge carrying the
// node network, with the gateway address) and makes it the nodes' router, as
// a cloud network's route table is: it forwards, and routes each node's pod
// CIDR to that node's address, so Pods reach Pods of other nodes, the control
// plane and the nodes whatever runs on the nodes. It sends no ICMP redirects
// (a node would then bypass it for a while, and paths would depend on timing).
func makeFabric(name string, nodes []Node) (*netns.NS, error) {
	f, err := topology.MakeFabric(name, []netip.Addr{topology.Gateway})
	if err != nil {
		return nil, err
	}
	err = f.Do(func() error {
		if err := topology.Sysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		links, err := netlink.LinkList()
		if err != nil {
			return fmt.Errorf("links: %w", err)
		}
		for _, dev := range append([]string{"all", "default"}, linkNames(links)...) {
			if err := topology.Sysctl("net/ipv4/conf/"+dev+"/send_redirects", "0"); err != nil {
				return err
			}
		}
		for _, n := range nodes {
			r := &netlink.Route{
				Dst: &net.IPNet{IP: n.PodCIDR.Addr().AsSlice(), Mask: net.CIDRMask(n.PodCIDR.Bits(), 32)},
				Gw:  n.Addr.AsSlice(),
			}
			if err := netlink.RouteAdd(r); err != nil {
				return fmt.Errorf("route %s via %s: %w", n.PodCIDR, n.Addr, err)
			}
		}
		return nil
	})
	if err != nil {
		_ = f.Delete()
		return nil, fmt.Errorf("fabric %s: %w", name, err)
	}
	return f, nil
}

func linkNames(links []netlink.Link) []string {
	var out []string
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}
