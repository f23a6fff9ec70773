package announce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Ethernet and ARP constants (RFC 826, IEEE 802.3).
const (
	etherTypeARP  = 0x0806
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd

	ethHeaderLen = 14
	arpLen       = 28
	// minFrameLen is the shortest Ethernet frame without FCS; shorter frames
	// are padded so that drivers that do not pad cannot emit runts.
	minFrameLen = 60

	arpHTypeEthernet = 1
	arpOpRequest     = 1
	arpOpReply       = 2
)

// mac is an Ethernet (EUI-48) address.
type mac [6]byte

var broadcastMAC = mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func (m mac) String() string { return net.HardwareAddr(m[:]).String() }

// macFrom converts a 6-byte hardware address; ok is false for any other length.
func macFrom(hw net.HardwareAddr) (m mac, ok bool) {
	if len(hw) != len(m) {
		return m, false
	}
	copy(m[:], hw)
	return m, true
}

// ethernet is the header of an Ethernet II frame.
type ethernet struct {
	Dst, Src mac
	Type     uint16
}

var errShort = errors.New("frame too short")

func decodeEthernet(b []byte) (ethernet, []byte, error) {
	if len(b) < ethHeaderLen {
		return ethernet{}, nil, errShort
	}
	var e ethernet
	copy(e.Dst[:], b[0:6])
	copy(e.Src[:], b[6:12])
	e.Type = binary.BigEndian.Uint16(b[12:14])
	return e, b[ethHeaderLen:], nil
}

func (e ethernet) appendTo(b []byte) []byte {
	b = append(b, e.Dst[:]...)
	b = append(b, e.Src[:]...)
	return binary.BigEndian.AppendUint16(b, e.Type)
}

// arpPacket is an Ethernet frame carrying an ARP packet for IPv4 over Ethernet.
type arpPacket struct {
	Eth ethernet
	Op  uint16
	SHA mac
	SPA netip.Addr
	THA mac
	TPA netip.Addr
}

// decodeARP parses an Ethernet/IPv4 ARP frame. Trailing padding is ignored;
// any other hardware or protocol type is an error.
func decodeARP(frame []byte) (arpPacket, error) {
	eth, b, err := decodeEthernet(frame)
	if err != nil {
		return arpPacket{}, fmt.Errorf("decode arp: %w", err)
	}
	if eth.Type != etherTypeARP {
		return arpPacket{}, fmt.Errorf("decode arp: ethertype %#04x", eth.Type)
	}
	if len(b) < arpLen {
		return arpPacket{}, fmt.Errorf("decode arp: %w", errShort)
	}
	htype, ptype := binary.BigEndian.Uint16(b[0:2]), binary.BigEndian.Uint16(b[2:4])
	if htype != arpHTypeEthernet || ptype != etherTypeIPv4 || b[4] != 6 || b[5] != 4 {
		return arpPacket{}, fmt.Errorf("decode arp: not ethernet/ipv4 (htype %d ptype %#04x hlen %d plen %d)", htype, ptype, b[4], b[5])
	}
	p := arpPacket{Eth: eth, Op: binary.BigEndian.Uint16(b[6:8])}
	copy(p.SHA[:], b[8:14])
	p.SPA = netip.AddrFrom4([4]byte(b[14:18]))
	copy(p.THA[:], b[18:24])
	p.TPA = netip.AddrFrom4([4]byte(b[24:28]))
	return p, nil
}

// encode returns the frame, padded to the Ethernet minimum. SPA and TPA must
// be IPv4 addresses.
func (p arpPacket) encode() []byte {
	b := make([]byte, 0, minFrameLen)
	b = p.Eth.appendTo(b)
	b = binary.BigEndian.AppendUint16(b, arpHTypeEthernet)
	b = binary.BigEndian.AppendUint16(b, etherTypeIPv4)
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, p.Op)
	spa, tpa := p.SPA.As4(), p.TPA.As4()
	b = append(b, p.SHA[:]...)
	b = append(b, spa[:]...)
	b = append(b, p.THA[:]...)
	b = append(b, tpa[:]...)
	return b[:minFrameLen] // zero padding: cap is minFrameLen, the tail is zeroed by make
}

// arpReply answers req on behalf of self: "req.TPA is at self", unicast to
// the asker. A probe (SPA 0.0.0.0) is answered the same way, with TPA
// 0.0.0.0, as Linux answers probes for its own addresses (RFC 5227 §2.1.1:
// the reply tells the prober the address is taken).
func arpReply(req arpPacket, self mac) arpPacket {
	return arpPacket{
		Eth: ethernet{Dst: req.SHA, Src: self, Type: etherTypeARP},
		Op:  arpOpReply,
		SHA: self, SPA: req.TPA,
		THA: req.SHA, TPA: req.SPA,
	}
}

// gratuitousARP returns the two broadcast frames that announce "ip is at
// self": an ARP announcement (request, SPA = TPA = ip, THA zero, RFC 5227
// §2.3) and a gratuitous reply (THA = SHA, which Linux requires before it
// treats a reply as gratuitous and lets it override a locked entry). Hosts
// that ignore one kind honour the other.
func gratuitousARP(ip netip.Addr, self mac) [2]arpPacket {
	eth := ethernet{Dst: broadcastMAC, Src: self, Type: etherTypeARP}
	return [2]arpPacket{
		{Eth: eth, Op: arpOpRequest, SHA: self, SPA: ip, TPA: ip},
		{Eth: eth, Op: arpOpReply, SHA: self, SPA: ip, THA: self, TPA: ip},
	}
}
