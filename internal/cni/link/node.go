package link

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Node is the kernel boundary in the node's namespace (the namespace of the
// thread that called OpenNode; see the package doc). It is not safe for
// concurrent use.
type Node struct{ h *netlink.Handle }

// OpenNode opens a netlink socket in the calling thread's namespace.
func OpenNode() (*Node, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return &Node{h: h}, nil
}

// Close releases the socket.
func (n *Node) Close() { n.h.Close() }

// Link returns the link named name, or an error wrapping ErrNotFound.
func (n *Node) Link(name string) (Info, error) {
	l, err := n.h.LinkByName(name)
	if isNotFound(err) {
		return Info{}, fmt.Errorf("link %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Info{}, fmt.Errorf("link %s: %w", name, err)
	}
	return infoOf(l), nil
}

// Veths returns every veth of the node, sorted by name.
func (n *Node) Veths() ([]Info, error) {
	ls, err := retryDump(n.h.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []Info
	for _, l := range ls {
		if l.Type() == "veth" {
			out = append(out, infoOf(l))
		}
	}
	return out, nil
}

// DeleteLink deletes the link named name; a missing one is not an error.
func (n *Node) DeleteLink(name string) error {
	l, err := n.h.LinkByName(name)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := n.h.LinkDel(l); err != nil && !isNotFound(err) && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}

// DefaultRouteMTU returns the MTU of the interface of the node's default
// route (IPv4 first, then IPv6); ok is false when there is none.
func (n *Node) DefaultRouteMTU() (mtu int, ok bool) {
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := retryDump(func() ([]netlink.Route, error) { return n.h.RouteList(nil, fam) })
		if err != nil {
			continue
		}
		for _, r := range rs {
			if r.Dst != nil {
				if ones, _ := r.Dst.Mask.Size(); ones != 0 {
					continue
				}
			}
			if r.LinkIndex == 0 {
				continue
			}
			if l, err := n.h.LinkByIndex(r.LinkIndex); err == nil && l.Attrs().MTU > 0 {
				return l.Attrs().MTU, true
			}
		}
	}
	return 0, false
}

// EnsureBridge makes the bridge name exist, be up and hold addrs (the
// gateways, kept without duplicate address detection). A bridge it creates
// gets mtu and a fixed MAC address derived from its name, so that the MAC
// does not follow its ports as they come and go. An existing link of that
// name that is not a bridge is an error.
func (n *Node) EnsureBridge(name string, mtu int, addrs []netip.Prefix) (Info, error) {
	l, err := n.h.LinkByName(name)
	if isNotFound(err) {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU, attrs.HardwareAddr = name, mtu, bridgeMAC(name)
		err = n.h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs})
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return Info{}, fmt.Errorf("create bridge %s: %w", name, err)
		}
		l, err = n.h.LinkByName(name)
	}
	if err != nil {
		return Info{}, fmt.Errorf("bridge %s: %w", name, err)
	}
	if l.Type() != "bridge" {
		return Info{}, fmt.Errorf("bridge %s: link exists and is a %s", name, l.Type())
	}
	for _, p := range addrs {
		a := &netlink.Addr{IPNet: ipNet(p)}
		if p.Addr().Is6() {
			// A router's address must not wait for DAD; neither may pods.
			if err := sysctl("0", "net/ipv6/conf", name, "accept_dad"); err != nil {
				return Info{}, fmt.Errorf("bridge %s: %w", name, err)
			}
			a.Flags = unix.IFA_F_NODAD
		}
		if err := n.h.AddrReplace(l, a); err != nil {
			return Info{}, fmt.Errorf("bridge %s: address %s: %w", name, p, err)
		}
	}
	if err := n.h.LinkSetUp(l); err != nil {
		return Info{}, fmt.Errorf("bridge %s: set up: %w", name, err)
	}
	l, err = n.h.LinkByName(name)
	if err != nil {
		return Info{}, fmt.Errorf("bridge %s: %w", name, err)
	}
	return infoOf(l), nil
}

// Addrs returns the addresses of link name.
func (n *Node) Addrs(name string) ([]netip.Prefix, error) {
	l, err := n.h.LinkByName(name)
	if isNotFound(err) {
		return nil, fmt.Errorf("link %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	return addrsOf(n.h, l)
}

// EnableForwarding turns on IPv4 and/or IPv6 forwarding in the node's namespace.
func (n *Node) EnableForwarding(v4, v6 bool) error {
	if v4 {
		if err := sysctl("1", "net/ipv4/ip_forward"); err != nil {
			return err
		}
	}
	if v6 {
		if err := sysctl("1", "net/ipv6/conf/all/forwarding"); err != nil {
			return err
		}
	}
	return nil
}

// SetRouteLocalnet lets IPv4 packets from 127.0.0.0/8 leave through link
// name (net.ipv4.conf.<name>.route_localnet=1), as DNAT of the node's own
// connections to 127.0.0.1:hostPort towards a pod needs.
func (n *Node) SetRouteLocalnet(name string) error {
	return sysctl("1", "net/ipv4/conf", name, "route_localnet")
}

// bridgeMAC derives a locally administered unicast MAC address from name.
func bridgeMAC(name string) net.HardwareAddr {
	sum := sha256.Sum256([]byte("svcnet bridge " + name))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&0xfe | 0x02
	return mac
}

func addrsOf(h *netlink.Handle, l netlink.Link) ([]netip.Prefix, error) {
	as, err := retryDump(func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", l.Attrs().Name, err)
	}
	var out []netip.Prefix
	for _, a := range as {
		if p, ok := prefixOf(a.IPNet); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// retryDump runs a netlink dump again (at most 3 times) when the kernel
// reports that it was interrupted by a concurrent change.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	var out []T
	var err error
	for range 3 {
		out, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return out, err
}
