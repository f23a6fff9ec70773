package announce

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// membership holds the IPv6 solicited-node multicast groups of the owned IPv6
// addresses on one interface.
//
// Why a kernel group join (IPV6_JOIN_GROUP) rather than PACKET_ADD_MEMBERSHIP:
// both open the NIC's multicast filter for 33:33:ff:XX:XX:XX, but only the
// kernel join makes the IPv6 stack send MLD reports (and answer MLD queries)
// for the group, and a switch doing MLD snooping forwards the neighbour
// solicitations for an owned IP to this port only if it has heard such a
// report. The socket is an unbound UDP socket, which receives nothing: it
// exists only to hold the memberships (solicitations are read from the
// AF_PACKET socket, see L2). Like every socket it stays in the network
// namespace it was created in, whichever thread later calls setsockopt.
//
// Several owned IPs can share a group (same low 24 bits), and the kernel
// refuses a second join of one group by one socket, so joins are counted.
// The kernel bounds memberships per socket by net.core.optmem_max (hundreds
// of groups by default); a join beyond that fails and SetOwned reports it.
// Not safe for concurrent use.
type membership struct {
	fd      int
	ifindex int
	refs    map[netip.Addr]int // solicited-node group -> owned IPs in it
}

// newMembership opens the socket in the current network namespace. It returns
// ErrNoIPv6 when the kernel has no IPv6.
func newMembership(ifindex int) (*membership, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if errors.Is(err, unix.EAFNOSUPPORT) {
		return nil, ErrNoIPv6
	}
	if err != nil {
		return nil, fmt.Errorf("open ipv6 membership socket: %w", err)
	}
	return &membership{fd: fd, ifindex: ifindex, refs: map[netip.Addr]int{}}, nil
}

// join adds ip's solicited-node group (counted).
func (m *membership) join(ip netip.Addr) error {
	g := solicitedNode(ip)
	if m.refs[g] == 0 {
		if err := m.setsockopt(unix.IPV6_JOIN_GROUP, g); err != nil {
			return fmt.Errorf("join %s for %s: %w", g, ip, err)
		}
	}
	m.refs[g]++
	return nil
}

// leave drops ip's solicited-node group once no owned IP needs it.
func (m *membership) leave(ip netip.Addr) error {
	g := solicitedNode(ip)
	if m.refs[g] == 0 {
		return nil
	}
	m.refs[g]--
	if m.refs[g] > 0 {
		return nil
	}
	delete(m.refs, g)
	if err := m.setsockopt(unix.IPV6_LEAVE_GROUP, g); err != nil {
		return fmt.Errorf("leave %s for %s: %w", g, ip, err)
	}
	return nil
}

func (m *membership) setsockopt(opt int, group netip.Addr) error {
	mreq := unix.IPv6Mreq{Multiaddr: group.As16(), Interface: uint32(m.ifindex)}
	return unix.SetsockoptIPv6Mreq(m.fd, unix.IPPROTO_IPV6, opt, &mreq)
}

// close drops every membership with the socket.
func (m *membership) close() error {
	m.refs = nil
	return unix.Close(m.fd)
}
