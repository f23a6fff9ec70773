package announce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// IPv6 neighbour discovery constants (RFC 8200, RFC 4443, RFC 4861).
const (
	ipv6HeaderLen   = 40
	protoICMPv6     = 58
	ndpHopLimit     = 255
	icmpNS          = 135
	icmpNA          = 136
	ndpMsgLen       = 24 // type, code, checksum, flags/reserved, target
	optSourceLLA    = 1
	optTargetLLA    = 2
	naFlagRouter    = 0x80
	naFlagSolicited = 0x40
	naFlagOverride  = 0x20
)

var allNodes = netip.MustParseAddr("ff02::1")

// solicitedNode returns the solicited-node multicast group of ip
// (ff02::1:ffXX:XXXX with the low 24 bits of ip, RFC 4291 §2.7.1).
func solicitedNode(ip netip.Addr) netip.Addr {
	a := ip.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 0x01, 12: 0xff, 13: a[13], 14: a[14], 15: a[15]})
}

// multicastMAC returns the Ethernet group address an IPv6 multicast group maps
// to (33:33 and the low 32 bits, RFC 2464 §7).
func multicastMAC(group netip.Addr) mac {
	a := group.As16()
	return mac{0x33, 0x33, a[12], a[13], a[14], a[15]}
}

// nsPacket is a validated neighbour solicitation with its Ethernet and IPv6
// headers.
type nsPacket struct {
	Eth      ethernet
	Src, Dst netip.Addr
	Target   netip.Addr
	// SourceLLA is the source link-layer address option; HasSourceLLA is
	// false when the option is absent (a DAD probe, or a unicast NUD probe).
	SourceLLA    mac
	HasSourceLLA bool
}

// isDAD reports whether the solicitation is a duplicate-address-detection
// probe (unspecified source).
func (p nsPacket) isDAD() bool { return p.Src.IsUnspecified() }

// errNotNS marks a valid frame that is simply not a neighbour solicitation.
var errNotNS = errors.New("not a neighbour solicitation")

// decodeNS parses an Ethernet frame holding an IPv6 neighbour solicitation and
// applies the validity checks of RFC 4861 §7.1.1: hop limit 255, ICMP code 0,
// a correct checksum, at least 24 bytes, a unicast target, options of nonzero
// length, and for a DAD probe a solicited-node destination and no source
// link-layer option. Extension headers are not followed (solicitations carry
// none); such frames return errNotNS.
func decodeNS(frame []byte) (nsPacket, error) {
	eth, b, err := decodeEthernet(frame)
	if err != nil {
		return nsPacket{}, fmt.Errorf("decode ns: %w", err)
	}
	if eth.Type != etherTypeIPv6 {
		return nsPacket{}, errNotNS
	}
	if len(b) < ipv6HeaderLen {
		return nsPacket{}, fmt.Errorf("decode ns: %w", errShort)
	}
	if b[0]>>4 != 6 || b[6] != protoICMPv6 {
		return nsPacket{}, errNotNS
	}
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	if len(b) < ipv6HeaderLen+plen {
		return nsPacket{}, fmt.Errorf("decode ns: %w (payload length %d, have %d)", errShort, plen, len(b)-ipv6HeaderLen)
	}
	p := nsPacket{Eth: eth, Src: netip.AddrFrom16([16]byte(b[8:24])), Dst: netip.AddrFrom16([16]byte(b[24:40]))}
	msg := b[ipv6HeaderLen : ipv6HeaderLen+plen]
	if len(msg) < 1 || msg[0] != icmpNS {
		return nsPacket{}, errNotNS
	}
	hop := b[7]
	switch {
	case hop != ndpHopLimit:
		return nsPacket{}, fmt.Errorf("decode ns: hop limit %d", hop)
	case len(msg) < ndpMsgLen:
		return nsPacket{}, fmt.Errorf("decode ns: %w (icmp length %d)", errShort, len(msg))
	case msg[1] != 0:
		return nsPacket{}, fmt.Errorf("decode ns: icmp code %d", msg[1])
	case icmpv6Checksum(p.Src, p.Dst, msg) != 0:
		return nsPacket{}, errors.New("decode ns: bad checksum")
	}
	p.Target = netip.AddrFrom16([16]byte(msg[8:24]))
	if p.Target.IsMulticast() {
		return nsPacket{}, fmt.Errorf("decode ns: multicast target %s", p.Target)
	}
	for opts := msg[ndpMsgLen:]; len(opts) > 0; {
		if len(opts) < 2 || opts[1] == 0 || len(opts) < int(opts[1])*8 {
			return nsPacket{}, errors.New("decode ns: malformed option")
		}
		n := int(opts[1]) * 8
		if opts[0] == optSourceLLA && n >= 8 {
			copy(p.SourceLLA[:], opts[2:8])
			p.HasSourceLLA = true
		}
		opts = opts[n:]
	}
	if p.isDAD() && (p.Dst != solicitedNode(p.Target) || p.HasSourceLLA) {
		return nsPacket{}, errors.New("decode ns: invalid duplicate-address probe")
	}
	return p, nil
}

// naPacket is a neighbour advertisement carrying a target link-layer address
// option, with its Ethernet and IPv6 headers.
type naPacket struct {
	Eth                 ethernet
	Src, Dst            netip.Addr
	Target              netip.Addr
	Solicited, Override bool
	TargetLLA           mac
}

// encode returns the frame with hop limit 255 and a correct checksum.
func (p naPacket) encode() []byte {
	const msgLen = ndpMsgLen + 8
	b := make([]byte, 0, ethHeaderLen+ipv6HeaderLen+msgLen)
	b = p.Eth.appendTo(b)
	b = append(b, 0x60, 0, 0, 0) // version 6, traffic class 0, flow label 0
	b = binary.BigEndian.AppendUint16(b, msgLen)
	b = append(b, protoICMPv6, ndpHopLimit)
	src, dst, target := p.Src.As16(), p.Dst.As16(), p.Target.As16()
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	var flags byte
	if p.Solicited {
		flags |= naFlagSolicited
	}
	if p.Override {
		flags |= naFlagOverride
	}
	msgStart := len(b)
	b = append(b, icmpNA, 0, 0, 0, flags, 0, 0, 0)
	b = append(b, target[:]...)
	b = append(b, optTargetLLA, 1)
	b = append(b, p.TargetLLA[:]...)
	binary.BigEndian.PutUint16(b[msgStart+2:], icmpv6Checksum(p.Src, p.Dst, b[msgStart:]))
	return b
}

// icmpv6Checksum returns the Internet checksum of msg under the IPv6
// pseudo-header (RFC 8200 §8.1). Over a message whose checksum field is zero it
// gives the value to store; over a message with a correct checksum it gives 0.
func icmpv6Checksum(src, dst netip.Addr, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	sum += uint32(len(msg)>>16) + uint32(len(msg)&0xffff) + protoICMPv6
	add(msg)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// solicitedNA answers ns on behalf of self (RFC 4861 §7.2.4). The advertisement
// is sent from the target address itself, as Linux does for its own
// addresses, so it does not depend on the interface's link-local address. A
// DAD probe is answered to all-nodes without the Solicited flag (the prober
// learns the address is taken); any other solicitation is answered unicast to
// its sender with Solicited and Override, to the source link-layer option when
// present and otherwise to the frame's Ethernet source (unicast NUD probes
// carry no option).
func solicitedNA(ns nsPacket, self mac) naPacket {
	na := naPacket{
		Eth:       ethernet{Src: self, Type: etherTypeIPv6},
		Src:       ns.Target,
		Target:    ns.Target,
		Override:  true,
		TargetLLA: self,
	}
	switch {
	case ns.isDAD():
		na.Dst, na.Eth.Dst = allNodes, multicastMAC(allNodes)
	case ns.HasSourceLLA:
		na.Dst, na.Eth.Dst, na.Solicited = ns.Src, ns.SourceLLA, true
	default:
		na.Dst, na.Eth.Dst, na.Solicited = ns.Src, ns.Eth.Src, true
	}
	return na
}

// unsolicitedNA is the announcement "ip is at self" to all nodes: not
// Solicited, Override so that existing cache entries switch (RFC 4861 §7.2.6).
func unsolicitedNA(ip netip.Addr, self mac) naPacket {
	return naPacket{
		Eth:       ethernet{Dst: multicastMAC(allNodes), Src: self, Type: etherTypeIPv6},
		Src:       ip,
		Dst:       allNodes,
		Target:    ip,
		Override:  true,
		TargetLLA: self,
	}
}
