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
//
// # Why the frames are hand-built
//
// github.com/mdlayher/ndp (v1.1.0) does not fit what L2 must do. Its Conn is
// an ICMPv6 raw socket (x/net/icmp, "ip6:ipv6-icmp") bound to an address the
// interface has (link-local, unique-local, global, or a literal that must
// exist there). The kernel hands such a socket only what it accepts as
// addressed to this host, and a LoadBalancer IP is not a local address: the
// unicast neighbour-unreachability probes that neighbours send to the IP itself
// never arrive, and the neighbours' cache entries would time out. Sending has
// the same limit: the kernel refuses a source address that is not local
// (IPV6_PKTINFO), so the advertisement could not come from the target address,
// as Linux sends its own. L2 therefore reads and writes whole Ethernet frames
// on AF_PACKET, and then the Ethernet and IPv6 headers, the pseudo-header
// checksum (which ndp leaves to the socket's IPV6_CHECKSUM) and the validity
// checks of RFC 4861 §7.1.1 (hop limit 255, code 0, the DAD rules, which an
// ICMPv6 socket leaves to the caller too) are this package's work in any case;
// ndp's codec would replace only the 24-byte message body and its one option
// (a few dozen lines of ndp.go). The kernel group join that ndp's JoinGroup
// would give is the one membership.go makes.
//
// github.com/mdlayher/arp (served as an untagged 2022 pseudo-version, with
// github.com/mdlayher/ethernet) would serve in substance: arp.New takes the
// packet.Conn L2 opens with its BPF filter, NewPacket builds the reply and
// both gratuitous frames, and ethernet.Frame pads to the minimum length. What
// it would not do is check the frames: Packet.UnmarshalBinary takes any
// hardware and protocol type and trusts the length fields, so decodeARP's
// Ethernet/IPv4 checks would stay, and its net.HardwareAddr fields would be
// converted to and from the mac type the answers and the NDP side share. Two
// more modules for the 28-byte ARP body (a few dozen lines of frames.go) did
// not pay; the frame tests (frames_test.go) pin every byte against the RFCs either
// way.
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
