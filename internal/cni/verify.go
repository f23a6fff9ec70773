package cni

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/svcnet/svcnet/internal/cni/link"
)

// observed is the state CHECK compares with prevResult: the kernel's (read
// by link) and the IPAM store's. An Err field set means that part could not
// be read (a missing link wraps link.ErrNotFound).
type observed struct {
	Pod         link.PodState
	PodErr      error
	Host        link.Info
	HostErr     error
	Bridge      link.Info
	BridgeErr   error
	BridgeAddrs []netip.Prefix
	Owned       []netip.Addr // the attachment's IPAM allocations
}

// verify returns every way obs differs from what prev (the ADD result) and the
// configuration promise for attachment a; none means CHECK passes. It is pure.
func verify(c *Config, a attachment, prev *types100.Result, obs observed) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	podIdx := -1
	hostName := HostVethName(a.ContainerID, a.IfName)
	alias := Alias(c.Name, a.ContainerID, a.IfName)
	for i, ifc := range prev.Interfaces {
		if ifc.Name == a.IfName && ifc.Sandbox != "" {
			podIdx = i
		}
	}
	if podIdx < 0 {
		fail("prevResult has no interface %s in a sandbox", a.IfName)
	}

	// The pod end.
	if obs.PodErr != nil {
		fail("pod interface: %v", obs.PodErr)
	} else {
		l := obs.Pod.Link
		if !l.Up {
			fail("pod interface %s is down", l.Name)
		}
		if l.Kind != "veth" {
			fail("pod interface %s is a %s, not a veth", l.Name, l.Kind)
		}
		if l.Alias != alias {
			fail("pod interface %s has alias %q, want %q", l.Name, l.Alias, alias)
		}
		if !obs.Pod.LoopbackUp {
			fail("pod loopback is down")
		}
		if podIdx >= 0 {
			want := prev.Interfaces[podIdx]
			if want.Mac != "" && !strings.EqualFold(want.Mac, l.MAC) {
				fail("pod interface %s has MAC %s, prevResult says %s", l.Name, l.MAC, want.Mac)
			}
			if want.Mtu != 0 && want.Mtu != l.MTU {
				fail("pod interface %s has MTU %d, prevResult says %d", l.Name, l.MTU, want.Mtu)
			}
		}
		gws := map[bool]netip.Addr{} // by Is4
		for _, ip := range prev.IPs {
			if ip.Interface != nil && *ip.Interface != podIdx {
				continue
			}
			p, ok := prefixOfIPNet(ip.Address.IP, ip.Address.Mask)
			if !ok {
				fail("prevResult address %s is malformed", ip.Address.String())
				continue
			}
			if !slices.Contains(obs.Pod.Addrs, p) {
				fail("address %s is missing from pod interface %s", p, l.Name)
			}
			if gw, ok := netip.AddrFromSlice(ip.Gateway); ok {
				gws[p.Addr().Is4()] = gw.Unmap()
			}
		}
		for _, r := range prev.Routes {
			dst, ok := prefixOfIPNet(r.Dst.IP, r.Dst.Mask)
			if !ok {
				fail("prevResult route %s is malformed", r.Dst.String())
				continue
			}
			gw := gws[dst.Addr().Is4()]
			if g, ok := netip.AddrFromSlice(r.GW); ok {
				gw = g.Unmap()
			}
			found := slices.ContainsFunc(obs.Pod.Routes, func(have link.Route) bool {
				return have.Dst == dst.Masked() && have.GW == gw
			})
			if !found {
				fail("route %s via %s is missing from the pod", dst, gw)
			}
		}
	}

	// The node end and the bridge.
	if obs.BridgeErr != nil {
		fail("bridge: %v", obs.BridgeErr)
	} else {
		if obs.Bridge.Kind != "bridge" {
			fail("%s is a %s, not a bridge", obs.Bridge.Name, obs.Bridge.Kind)
		}
		if !obs.Bridge.Up {
			fail("bridge %s is down", obs.Bridge.Name)
		}
		for _, gw := range gatewayPrefixes(c.Subnets) {
			if !slices.Contains(obs.BridgeAddrs, gw) {
				fail("bridge %s lacks gateway address %s", obs.Bridge.Name, gw)
			}
		}
	}
	if obs.HostErr != nil {
		fail("node end: %v", obs.HostErr)
	} else {
		h := obs.Host
		if h.Kind != "veth" {
			fail("node end %s is a %s, not a veth", hostName, h.Kind)
		}
		if obs.BridgeErr == nil && h.Master != obs.Bridge.Index {
			fail("node end %s is not a port of bridge %s", hostName, c.Bridge)
		}
		if !h.Up {
			fail("node end %s is down", hostName)
		}
		if h.Alias != alias {
			fail("node end %s has alias %q, want %q", hostName, h.Alias, alias)
		}
	}

	// The IPAM reservations.
	for _, ip := range addrsOfResult(prev) {
		if !slices.Contains(obs.Owned, ip) {
			fail("address %s is not allocated to %s/%s in %s", ip, a.ContainerID, a.IfName, c.DataDir)
		}
	}
	return bad
}

func prefixOfIPNet(ip net.IP, mask net.IPMask) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, bits := mask.Size()
	if bits != a.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}
