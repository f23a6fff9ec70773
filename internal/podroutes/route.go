package podroutes

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/model"
)

// Protocol is the route protocol number that marks svcnet's pod routes (the
// rtm_protocol field; unassigned in iproute2's rt_protos, as Calico's 80).
const Protocol = 154

// Route is one host-gw route: Dst (a pod CIDR, masked) via Via (a node IP of
// the same family). Node names the node it leads to; it is informational and
// not stored in the kernel (routes read back have Node "").
type Route struct {
	Node string
	Dst  netip.Prefix
	Via  netip.Addr
}

func (r Route) String() string {
	if r.Node == "" {
		return fmt.Sprintf("%s via %s", r.Dst, r.Via)
	}
	return fmt.Sprintf("%s via %s (node %s)", r.Dst, r.Via, r.Node)
}

// Reasons a node or pod CIDR gets no route. None of them is fatal: the others
// are routed all the same.
var (
	ErrOwnNode          = errors.New("this node's own pod CIDRs need no route")
	ErrNoPodCIDR        = errors.New("no pod CIDR")
	ErrNoInternalIP     = errors.New("no InternalIP of the pod CIDR's family")
	ErrDuplicateCIDR    = errors.New("pod CIDR already routed to another node")
	ErrOverlapsLocal    = errors.New("pod CIDR overlaps a local interface's network")
	ErrNextHopLocal     = errors.New("next hop is a local address")
	ErrNextHopNotOnLink = errors.New("next hop is on no connected network")
	ErrExists           = errors.New("a route to the pod CIDR exists and is not svcnet's")
)

// SkipError says why one node (or one of its pod CIDRs) gets no route.
type SkipError struct {
	Node string
	Dst  netip.Prefix // the pod CIDR, when the reason is about one
	Err  error        // one of the Err* reasons
}

func (e *SkipError) Error() string {
	if e.Dst.IsValid() {
		return fmt.Sprintf("node %s: pod CIDR %s: %v", e.Node, e.Dst, e.Err)
	}
	return fmt.Sprintf("node %s: %v", e.Node, e.Err)
}

func (e *SkipError) Unwrap() error { return e.Err }

// Desired returns the routes this node (self) wants to the pod CIDRs of the
// other nodes, sorted by destination (IPv4 first), and a *SkipError for every
// node or pod CIDR that gets none, in node-name order (self included, as
// ErrOwnNode). The next hop is the node's first InternalIP of the CIDR's
// family. When two nodes claim the same CIDR the first by name gets it.
func Desired(nodes []*model.Node, self string) ([]Route, []error) {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b *model.Node) int { return cmp.Compare(a.Name, b.Name) })
	var routes []Route
	var errs []error
	taken := map[netip.Prefix]string{}
	for _, n := range nodes {
		switch {
		case n == nil:
			continue
		case n.Name == self:
			errs = append(errs, &SkipError{Node: n.Name, Err: ErrOwnNode})
			continue
		case len(n.PodCIDRs) == 0:
			errs = append(errs, &SkipError{Node: n.Name, Err: ErrNoPodCIDR})
			continue
		}
		for _, cidr := range n.PodCIDRs {
			dst := cidr.Masked()
			via, ok := internalIP(n, dst.Addr().Is4())
			switch {
			case !ok:
				errs = append(errs, &SkipError{Node: n.Name, Dst: dst, Err: ErrNoInternalIP})
			case taken[dst] != "":
				errs = append(errs, &SkipError{Node: n.Name, Dst: dst, Err: fmt.Errorf("%w (%s)", ErrDuplicateCIDR, taken[dst])})
			default:
				taken[dst] = n.Name
				routes = append(routes, Route{Node: n.Name, Dst: dst, Via: via})
			}
		}
	}
	slices.SortFunc(routes, compareRoutes)
	return routes, errs
}

// internalIP returns n's first InternalIP of the family (v4 or v6).
func internalIP(n *model.Node, v4 bool) (netip.Addr, bool) {
	for _, a := range n.Addresses {
		if a.Type != "InternalIP" {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() == v4 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// Usable keeps the routes the local interface addresses allow (each address
// with its prefix length, as on the interface) and returns a *SkipError for
// each of the others: a pod CIDR overlapping a connected network
// (ErrOverlapsLocal), a next hop that is a local address (ErrNextHopLocal) or
// on no connected network (ErrNextHopNotOnLink). Order is kept.
func Usable(routes []Route, local []netip.Prefix) ([]Route, []error) {
	var ok []Route
	var errs []error
	for _, r := range routes {
		if err := usable(r, local); err != nil {
			errs = append(errs, &SkipError{Node: r.Node, Dst: r.Dst, Err: err})
			continue
		}
		ok = append(ok, r)
	}
	return ok, errs
}

func usable(r Route, local []netip.Prefix) error {
	var same []netip.Prefix
	for _, l := range local {
		if l.Addr().Is4() == r.Dst.Addr().Is4() {
			same = append(same, l)
		}
	}
	for _, l := range same {
		if l.Masked().Overlaps(r.Dst) {
			return fmt.Errorf("%w (%s)", ErrOverlapsLocal, l.Masked())
		}
	}
	for _, l := range same {
		if l.Addr() == r.Via {
			return ErrNextHopLocal
		}
	}
	for _, l := range same {
		if l.Contains(r.Via) {
			return nil
		}
	}
	return ErrNextHopNotOnLink
}

func compareRoutes(a, b Route) int {
	if c := a.Dst.Addr().Compare(b.Dst.Addr()); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Dst.Bits(), b.Dst.Bits()); c != 0 {
		return c
	}
	return a.Via.Compare(b.Via)
}
