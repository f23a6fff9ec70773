// Package announce makes the local link deliver LoadBalancer IPs to this node,
// as MetalLB's layer-2 mode does: for every IP it owns on one interface it
// answers ARP requests (IPv4) and neighbour solicitations (IPv6) with the
// interface's MAC address, and when it becomes the owner of an IP it sends
// gratuitous ARP / unsolicited neighbour advertisements so that hosts and
// routers on the segment switch to this node at once.
//
// Deciding which node owns which IP is not this package's job (the speaker
// does that); allocating the IPs is not either. Announcer is the narrow
// interface at the kernel boundary: L2 speaks to the kernel through AF_PACKET
// sockets, Fake tracks the same state in memory for unit tests.
//
// Everything that decides what to put on the wire (frame encoding and
// decoding, which request deserves which answer, the repeat schedule) is pure
// and lives in files without sockets (frames.go, ndp.go, answer.go,
// schedule.go, owned.go, linkmsg.go).
package announce

import (
	"errors"
	"net/netip"
)

// Announcer announces a set of IPs on one interface.
//
// SetOwned replaces the whole set. Newly owned IPs are announced at once
// (gratuitous ARP request and reply for IPv4; an unsolicited neighbour
// advertisement with the Override flag for IPv6) and the announcement is
// repeated (0, 200 ms and 1 s after) to survive a lost frame; IPs no longer owned
// stop being answered immediately and their pending repeats are dropped.
// SetOwned applies every IP it can: an IP it cannot announce (ErrInvalidIP,
// ErrNoIPv6, a failed multicast join) is left out of the set and named in the
// returned error, and never blocks the others.
//
// Owned returns the set being answered, sorted, without duplicates.
//
// Reannounce announces every owned IP afresh, as SetOwned announces a newly
// owned one: for when another node may have claimed them while this one did
// not hear it (a healed partition, a node that was stalled), so that the
// neighbours' caches name this node again.
type Announcer interface {
	SetOwned(ips []netip.Addr) error
	Owned() []netip.Addr
	Reannounce()
}

var (
	// ErrInvalidIP: the address can never be a LoadBalancer IP on a link
	// (invalid, unspecified, loopback, multicast, link-local or broadcast).
	ErrInvalidIP = errors.New("not an announceable unicast address")
	// ErrNoIPv6: the kernel has no IPv6, so solicited-node multicast groups
	// cannot be joined and IPv6 addresses cannot be announced.
	ErrNoIPv6 = errors.New("ipv6 unavailable")
	// ErrInterfaceGone: the interface was deleted (or moved to another network
	// namespace) while Run was answering on it.
	ErrInterfaceGone = errors.New("interface deleted")
	// ErrClosed: the announcer was closed (Close, or Run returned).
	ErrClosed = errors.New("announcer closed")
)

var (
	_ Announcer = (*L2)(nil)
	_ Announcer = (*Fake)(nil)
)
