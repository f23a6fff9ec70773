package link

import (
	"errors"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// ErrNotFound is returned (wrapped) when a link does not exist.
var ErrNotFound = errors.New("link not found")

// ErrExists is returned (wrapped) by AttachPod when the pod already has an
// interface of the requested name that is not the plugin's.
var ErrExists = errors.New("interface already exists")

// ErrNodeEndTaken is returned (wrapped) by AttachPod when the node has a link
// of the node end's name that is not this attachment's (another alias).
var ErrNodeEndTaken = errors.New("node end name taken")

// Info is what the plugin reports and checks about a link.
type Info struct {
	Name   string
	Index  int
	Kind   string // "bridge", "veth", ...
	MAC    string
	MTU    int
	Up     bool // administratively up
	Master int  // index of the bridge it is a port of, 0 if none
	Alias  string
}

// Route is a route of the pod: to Dst via GW (invalid: directly connected),
// with the gateway taken as on-link when OnLink is set.
type Route struct {
	Dst    netip.Prefix
	GW     netip.Addr
	OnLink bool
}

// String renders the route as ip-route does.
func (r Route) String() string {
	s := r.Dst.String()
	if r.GW.IsValid() {
		s += " via " + r.GW.String()
	}
	if r.OnLink {
		s += " onlink"
	}
	return s
}

// PodState is the pod side of an attachment as the kernel holds it.
type PodState struct {
	Link       Info
	Addrs      []netip.Prefix // every address of the interface
	Routes     []Route        // main-table routes through the interface
	LoopbackUp bool
}

// PodSpec is the pod side of an attachment to create or refresh.
type PodSpec struct {
	NetNS    string // path of the pod's network namespace
	IfName   string // the interface in the pod (CNI_IFNAME)
	HostVeth string // the node side of the veth
	Bridge   string // the bridge the node side joins
	MTU      int
	Alias    string         // set on both ends; identifies the owner
	Addrs    []netip.Prefix // the pod's addresses (host prefixes)
	Routes   []Route
}

func infoOf(l netlink.Link) Info {
	a := l.Attrs()
	return Info{
		Name:   a.Name,
		Index:  a.Index,
		Kind:   l.Type(),
		MAC:    a.HardwareAddr.String(),
		MTU:    a.MTU,
		Up:     a.Flags&net.FlagUp != 0,
		Master: a.MasterIndex,
		Alias:  a.Alias,
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, bits := n.Mask.Size()
	if bits != a.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}

func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf)
}
