package podroutes

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Netlink is the Kernel of one network namespace, over rtnetlink.
type Netlink struct {
	h *netlink.Handle
}

var _ Kernel = (*Netlink)(nil)

// NewNetlink opens an rtnetlink socket in the calling thread's network
// namespace; the Netlink keeps working on that namespace from any goroutine
// (call it inside netns.NS.Do to manage a namespace other than the process's).
func NewNetlink() (*Netlink, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("pod routes: open rtnetlink: %w", err)
	}
	return &Netlink{h: h}, nil
}

// Close releases the socket.
func (k *Netlink) Close() { k.h.Close() }

func (k *Netlink) List() ([]Route, error) {
	filter := &netlink.Route{Protocol: Protocol, Table: unix.RT_TABLE_MAIN}
	rs, err := k.h.RouteListFiltered(netlink.FAMILY_ALL, filter, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list pod routes: %w", err)
	}
	out := make([]Route, 0, len(rs))
	for _, r := range rs {
		if r.Dst == nil {
			continue // a default route marked with our protocol is not one we make
		}
		ones, _ := r.Dst.Mask.Size()
		ip, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		route := Route{Dst: netip.PrefixFrom(ip.Unmap(), ones).Masked()}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			route.Via = gw.Unmap()
		}
		out = append(out, route)
	}
	slices.SortFunc(out, compareRoutes)
	return out, nil
}

func (k *Netlink) Add(r Route) error {
	if err := k.h.RouteAdd(nlRoute(r)); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add route %s: %w", r, ErrExists)
		}
		return fmt.Errorf("add route %s: %w", r, err)
	}
	return nil
}

func (k *Netlink) Replace(r Route) error {
	if err := k.h.RouteReplace(nlRoute(r)); err != nil {
		return fmt.Errorf("replace route %s: %w", r, err)
	}
	return nil
}

func (k *Netlink) Delete(r Route) error {
	// The kernel matches protocol and gateway too, so only our exact route goes.
	if err := k.h.RouteDel(nlRoute(r)); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("delete route %s: %w", r, err)
	}
	return nil
}

func (k *Netlink) LocalAddrs() ([]netip.Prefix, error) {
	as, err := k.h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range as {
		if a.IPNet == nil || a.Scope == unix.RT_SCOPE_HOST {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out, nil
}

func nlRoute(r Route) *netlink.Route {
	return &netlink.Route{
		Dst:      &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen())},
		Gw:       r.Via.AsSlice(),
		Protocol: Protocol,
		Table:    unix.RT_TABLE_MAIN,
	}
}
