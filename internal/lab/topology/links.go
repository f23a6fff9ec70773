package topology

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/netns"
)

// ErrNoNeighbour is returned by ClientNeighbour when the client has no
// resolved neighbour entry for the address.
var ErrNoNeighbour = errors.New("no resolved neighbour entry")

// ClientNeighbour returns the MAC the client's eth0 neighbour table holds for ip.
func ClientNeighbour(names Names, ip netip.Addr) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	err := netns.DoNamed(names.Client(), func() error {
		link, err := netlink.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("eth0: %w", err)
		}
		fam := netlink.FAMILY_V4
		if ip.Is6() {
			fam = netlink.FAMILY_V6
		}
		neighs, err := netlink.NeighList(link.Attrs().Index, fam)
		if err != nil {
			return fmt.Errorf("neighbours: %w", err)
		}
		for _, n := range neighs {
			a, ok := netip.AddrFromSlice(n.IP)
			if !ok || a.Unmap() != ip || len(n.HardwareAddr) == 0 {
				continue
			}
			if n.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED) != 0 {
				continue
			}
			mac = n.HardwareAddr
			return nil
		}
		return fmt.Errorf("client: %s: %w", ip, ErrNoNeighbour)
	})
	return mac, err
}

// LinkMAC returns the hardware address of link in the named namespace.
func LinkMAC(nsName, link string) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	err := netns.DoNamed(nsName, func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", link, nsName, err)
		}
		mac = l.Attrs().HardwareAddr
		return nil
	})
	return mac, err
}

// SetNodeLink connects node i to the node network or cuts it off, as a failed
// node or a pulled cable would be: it sets the node's port on the fabric bridge
// up or down. The node's own eth0 stays administratively up (it only loses its
// carrier), so its addresses and routes survive the cut.
func SetNodeLink(n Names, i int, up bool) error {
	return netns.DoNamed(n.Fabric(), func() error {
		port := NodeName(i)
		link, err := netlink.LinkByName(port)
		if err != nil {
			return fmt.Errorf("fabric port %s: %w", port, err)
		}
		if up {
			err = netlink.LinkSetUp(link)
		} else {
			err = netlink.LinkSetDown(link)
		}
		if err != nil {
			return fmt.Errorf("fabric port %s up=%v: %w", port, up, err)
		}
		return nil
	})
}
