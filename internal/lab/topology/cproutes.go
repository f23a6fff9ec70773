package topology

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/netns"
)

// RoutePodCIDRs gives the named namespace on the node network a route to each
// node's pod CIDR of each of the stack's families via that node's address of
// that family (192.168.i.0/24 via node i), as --pod-routes
// gives the nodes. The control plane needs them to answer pods: a pod's
// connection to it is not masqueraded, and the fabric forwards nothing, so
// without them its replies would go to the default gateway and be lost.
func RoutePodCIDRs(nsName string, s Stack, nodes int) error {
	return netns.DoNamed(nsName, func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("%s: eth0: %w", nsName, err)
		}
		for i := 1; i <= nodes; i++ {
			vias := s.NodeAddrs(i)
			for k, dst := range s.PodCIDRs(i) {
				r := &netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: netAddr(dst).IPNet, Gw: vias[k].AsSlice()}
				if err := netlink.RouteReplace(r); err != nil {
					return fmt.Errorf("%s: route %s via %s: %w", nsName, dst, vias[k], err)
				}
			}
		}
		return nil
	})
}
