package cni

import (
	"net"
	"net/netip"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/svcnet/svcnet/internal/cni/ipam"
	"github.com/svcnet/svcnet/internal/cni/link"
)

// attachment is what identifies one ADD: the container and its interface.
type attachment struct {
	ContainerID string
	IfName      string
	NetNS       string
}

func (a attachment) owner() ipam.Owner {
	return ipam.Owner{ContainerID: a.ContainerID, IfName: a.IfName}
}

// gatewayPrefixes returns the bridge's addresses: the gateway of each subnet
// with the subnet's length (192.168.1.1/24).
func gatewayPrefixes(subnets []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, len(subnets))
	for i, s := range subnets {
		out[i] = netip.PrefixFrom(ipam.Gateway(s), s.Bits())
	}
	return out
}

// defaultRoute returns the default route of a's family.
func defaultRoute(a netip.Addr) netip.Prefix {
	if a.Is4() {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
}

// subnetOf returns the subnet holding a.
func subnetOf(subnets []netip.Prefix, a netip.Addr) (netip.Prefix, bool) {
	for _, s := range subnets {
		if s.Contains(a) {
			return s, true
		}
	}
	return netip.Prefix{}, false
}

// podSpec plans the pod side of an attachment: each address as a host route
// (/32, /128) and, per family, a default route via the bridge's gateway
// marked on-link, so that all of the pod's traffic, also to pods on the same
// bridge, is routed by the node (whose conntrack and NAT see both
// directions), and nothing depends on br_netfilter.
func podSpec(c *Config, a attachment, mtu int, addrs []netip.Addr) link.PodSpec {
	s := link.PodSpec{
		NetNS:    a.NetNS,
		IfName:   a.IfName,
		HostVeth: HostVethName(a.ContainerID, a.IfName),
		Bridge:   c.Bridge,
		MTU:      mtu,
		Alias:    Alias(c.Name, a.ContainerID, a.IfName),
	}
	for _, ip := range addrs {
		s.Addrs = append(s.Addrs, netip.PrefixFrom(ip, ip.BitLen()))
		if sub, ok := subnetOf(c.Subnets, ip); ok {
			s.Routes = append(s.Routes, link.Route{Dst: defaultRoute(ip), GW: ipam.Gateway(sub), OnLink: true})
		}
	}
	return s
}

// Indices of the interfaces in an ADD result.
const (
	ifBridge = 0
	ifHost   = 1
	ifPod    = 2
)

// buildResult returns the ADD result: interfaces (bridge, node end, pod end
// with its sandbox), the pod's addresses on the pod end with their gateways,
// the default routes, and the configured DNS.
func buildResult(c *Config, a attachment, bridge, host, pod link.Info, addrs []netip.Addr) *types100.Result {
	r := &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{
			{Name: bridge.Name, Mac: bridge.MAC},
			{Name: host.Name, Mac: host.MAC, Mtu: host.MTU},
			{Name: pod.Name, Mac: pod.MAC, Mtu: pod.MTU, Sandbox: a.NetNS},
		},
		DNS: c.DNS,
	}
	for _, ip := range addrs {
		sub, ok := subnetOf(c.Subnets, ip)
		if !ok {
			continue
		}
		gw := ipam.Gateway(sub)
		r.IPs = append(r.IPs, &types100.IPConfig{
			Interface: types100.Int(ifPod),
			Address:   net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())},
			Gateway:   gw.AsSlice(),
		})
		d := defaultRoute(ip)
		r.Routes = append(r.Routes, &types.Route{
			Dst: net.IPNet{IP: d.Addr().AsSlice(), Mask: net.CIDRMask(0, ip.BitLen())},
			GW:  gw.AsSlice(),
		})
	}
	return r
}

// addrsOfResult returns the addresses of a result's IPs, sorted.
func addrsOfResult(r *types100.Result) []netip.Addr {
	var out []netip.Addr
	for _, ip := range r.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// families reports which IP families the subnets have.
func families(subnets []netip.Prefix) (v4, v6 bool) {
	for _, s := range subnets {
		if s.Addr().Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	return v4, v6
}
