package nftrace

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/nft"
)

// Packet is the packet as the first event of a base chain's run reported
// it: its network and transport headers as they were when that chain ran.
type Packet struct {
	Proto uint8 // layer-4 protocol: IPv4 protocol or IPv6 next header
	Src   netip.AddrPort
	Dst   netip.AddrPort
	// TCPFlags are the TCP header's flags (TCP only).
	TCPFlags TCPFlags
}

func (p Packet) String() string {
	s := fmt.Sprintf("%s %s → %s", protoName(p.Proto), p.Src, p.Dst)
	if p.Proto == unix.IPPROTO_TCP {
		s += " " + p.TCPFlags.String()
	}
	return s
}

// TCPFlags are the flag bits of a TCP header (byte 13).
type TCPFlags uint8

// TCP flag bits.
const (
	FIN TCPFlags = 1 << iota
	SYN
	RST
	PSH
	ACK
	URG
	ECE
	CWR
)

func (f TCPFlags) String() string {
	names := []string{"FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"}
	var out []string
	for i, n := range names {
		if f&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "|")
}

// CT is the conntrack state of the packet when the event was emitted, as
// recent kernels report it.
type CT struct {
	// State is the packet's NF_CT_STATE_* bits: invalid 1, established 2,
	// related 4, new 8, untracked 64.
	State uint32
	// ID, Direction (0 original, 1 reply) and Status (IPS_* bits) are
	// set when the packet has a conntrack entry (HasEntry).
	HasEntry  bool
	ID        uint32
	Direction uint8
	Status    uint32
}

// Event is one nf_tables trace event (NFT_MSG_TRACE).
type Event struct {
	// ID is the kernel's trace id, a hash of the skb's address, flow hash
	// and input interface: the same for the events of one packet while
	// those stay the same, but not unique to it (see the package doc;
	// Armed.Packets groups events by packet).
	ID uint32
	// Family is the family of the table of the base chain being run (the
	// message's nfgen family): ip, ip6 or inet.
	Family NFProto
	// NFProto is the family of the packet at the hook (NFTA_TRACE_NFPROTO):
	// ip or ip6 (an inet table sees both).
	NFProto NFProto
	Table   string
	Chain   string
	// Handle is the rule's handle; 0 on policy events and on the return
	// event of a chain's end.
	Handle uint64
	Type   Type
	// Verdict is set on rule and return events.
	Verdict Verdict
	// Policy is the base chain's policy (accept or drop) on policy events.
	Policy Code
	// Mark is the packet mark after the rule (0 when none).
	Mark uint32
	// Iif and Oif are interface indexes in the namespace (0: none) and their
	// names when the listener could resolve them; like Packet they are only
	// sent on the first event of a base chain's run.
	Iif, Oif         uint32
	IifName, OifName string
	// Packet is set on the first event of each run of a base chain, nil on
	// the others.
	Packet *Packet
	// CT is set when the kernel sends conntrack attributes (see the
	// package doc).
	CT *CT
}

// EndOfChain reports whether e is the event of evaluation running past the
// last rule of its chain (handle 0, verdict continue), whichever type the
// kernel gave it (see the package doc).
func (e Event) EndOfChain() bool {
	return e.Type != TypePolicy && e.Handle == 0
}

// String renders the event on one line, like `nft monitor trace`.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace id %08x %s %s %s", e.ID, e.Family, e.Table, e.Chain)
	fmt.Fprintf(&b, " %s", e.Type)
	switch {
	case e.Type == TypePolicy:
		fmt.Fprintf(&b, " %s", e.Policy)
	case e.Handle != 0:
		fmt.Fprintf(&b, " handle %d verdict %s", e.Handle, e.Verdict)
	default:
		fmt.Fprintf(&b, " (end of chain) verdict %s", e.Verdict)
	}
	if e.Mark != 0 {
		fmt.Fprintf(&b, " mark 0x%x", e.Mark)
	}
	if e.Packet != nil {
		fmt.Fprintf(&b, " packet: %s", e.Packet)
	}
	if e.Iif != 0 {
		fmt.Fprintf(&b, " iif %s", ifName(e.Iif, e.IifName))
	}
	if e.Oif != 0 {
		fmt.Fprintf(&b, " oif %s", ifName(e.Oif, e.OifName))
	}
	if e.CT != nil {
		fmt.Fprintf(&b, " ct state %s", ctStateString(e.CT.State))
		if e.CT.HasEntry {
			dir := "original"
			if e.CT.Direction == 1 {
				dir = "reply"
			}
			fmt.Fprintf(&b, " ct direction %s ct id %d", dir, e.CT.ID)
		}
	}
	return b.String()
}

func ifName(idx uint32, name string) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("#%d", idx)
}

func ctStateString(s uint32) string {
	names := []struct {
		bit  uint32
		name string
	}{{1, "invalid"}, {2, "established"}, {4, "related"}, {8, "new"}, {64, "untracked"}}
	var out []string
	for _, n := range names {
		if s&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("0x%x", s)
	}
	return strings.Join(out, ",")
}

func protoName(p uint8) string {
	if n, ok := nft.ProtoName(p); ok {
		return n
	}
	switch p {
	case unix.IPPROTO_ICMP:
		return "icmp"
	case unix.IPPROTO_ICMPV6:
		return "icmpv6"
	}
	return fmt.Sprintf("proto(%d)", p)
}
