package topology

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// FabricBridge is the bridge in the fabric namespace that carries the node network.
const FabricBridge = "br0"

// mtu of the node network.
const mtu = 1500

// MakeFabric creates the fabric namespace with its bridge up. The bridge holds
// the node network's gateway addresses (gateways: .1, and ::1 in an IPv6 lab), so that nodes have the default route a
// real node has (a node's own connections to a ClusterIP are routed before they
// are DNATed, and need a route to leave by); the lab's fabric forwards nothing
// (internal/nodecluster turns forwarding on and routes pod CIDRs there).
func MakeFabric(name string, gateways []netip.Addr) (*netns.NS, error) {
	ns, err := netns.Create(name)
	if err != nil {
		return nil, err
	}
	err = ns.Do(func() error {
		if err := linkUp("lo"); err != nil {
			return err
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: FabricBridge, MTU: mtu}}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("add bridge %s: %w", FabricBridge, err)
		}
		if err := addAddrs(br, gateways); err != nil {
			return fmt.Errorf("%s: %w", FabricBridge, err)
		}
		return linkUp(FabricBridge)
	})
	if err != nil {
		return nil, fmt.Errorf("fabric %s: %w", name, err)
	}
	return ns, nil
}

// Attach creates a namespace called name whose eth0 holds addrs on the fabric
// (each in its family's node network), through a veth whose fabric end (port)
// is on the bridge, with a default route per family via the gateway. It also
// sets the sysctls a node needs when forward is true.
func Attach(fabric *netns.NS, name, port string, addrs []netip.Addr, forward bool) (*netns.NS, error) {
	ns, err := netns.Create(name)
	if err != nil {
		return nil, err
	}
	err = fabric.Do(func() error {
		br, err := netlink.LinkByName(FabricBridge)
		if err != nil {
			return fmt.Errorf("bridge %s: %w", FabricBridge, err)
		}
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: port, MTU: mtu, MasterIndex: br.Attrs().Index},
			PeerName:      "eth0",
			PeerNamespace: netlink.NsFd(ns.Fd()),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s: %w", port, err)
		}
		return linkUp(port)
	})
	if err != nil {
		return nil, fmt.Errorf("attach %s to the fabric: %w", name, err)
	}
	err = ns.Do(func() error {
		if err := linkUp("lo"); err != nil {
			return err
		}
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("eth0: %w", err)
		}
		if err := addAddrs(eth0, addrs); err != nil {
			return fmt.Errorf("eth0: %w", err)
		}
		if err := netlink.LinkSetUp(eth0); err != nil {
			return fmt.Errorf("eth0 up: %w", err)
		}
		for _, a := range addrs {
			gw := Gateway
			if a.Is6() {
				gw = Twin6(Gateway)
			}
			def := &netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: gw.AsSlice()}
			if err := netlink.RouteAdd(def); err != nil {
				return fmt.Errorf("default route via %s: %w", gw, err)
			}
			if !forward {
				continue
			}
			// A node routes: to its pods, to other nodes' pods (--pod-routes), and
			// NodePort traffic DNATed to another node's pod.
			key := "net/ipv4/ip_forward"
			if a.Is6() {
				key = "net/ipv6/conf/all/forwarding"
			}
			if err := Sysctl(key, "1"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", name, err)
	}
	return ns, nil
}

func linkUp(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	return nil
}

// Sysctl writes a sysctl of the calling thread's network namespace (call it inside
// NS.Do).
func Sysctl(key, value string) error {
	if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// addAddrs puts each address on link with its node network's prefix length.
// IPv6 ones skip duplicate address detection (the lab made every address
// once, on its own network): usable at once, not tentative for a second.
func addAddrs(link netlink.Link, addrs []netip.Addr) error {
	for _, a := range addrs {
		na := netAddr(netip.PrefixFrom(a, NodeNetwork.Bits()))
		if a.Is6() {
			na = netAddr(netip.PrefixFrom(a, NodeNetwork6.Bits()))
			na.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrAdd(link, na); err != nil {
			return fmt.Errorf("address %s: %w", na.IPNet, err)
		}
	}
	return nil
}

// netAddr is prefix p's address with its length, as netlink takes it.
func netAddr(p netip.Prefix) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
}
