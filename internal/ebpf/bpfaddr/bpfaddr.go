// Package bpfaddr encodes addresses, ports and protocols as svcnet's BPF
// programs hold them in their maps, and decodes them back: an address is 16
// bytes of IPv6 (IPv4 mapped to ::ffff:a.b.c.d) in network order, a __u32[4];
// a port is a __u16 in network order; a protocol is its IP protocol number.
package bpfaddr

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/svcnet/svcnet/internal/model"
)

// IP protocol numbers.
const (
	ProtoTCP  = 6
	ProtoUDP  = 17
	ProtoSCTP = 132
)

// ProtoNumber maps a Service protocol to its IP protocol number.
func ProtoNumber(p model.Protocol) (uint8, error) {
	switch p {
	case model.ProtocolTCP:
		return ProtoTCP, nil
	case model.ProtocolUDP:
		return ProtoUDP, nil
	case model.ProtocolSCTP:
		return ProtoSCTP, nil
	}
	return 0, fmt.Errorf("protocol %q: not TCP, UDP or SCTP", p)
}

// Protocol is ProtoNumber's inverse.
func Protocol(n uint8) (model.Protocol, error) {
	switch n {
	case ProtoTCP:
		return model.ProtocolTCP, nil
	case ProtoUDP:
		return model.ProtocolUDP, nil
	case ProtoSCTP:
		return model.ProtocolSCTP, nil
	}
	return "", fmt.Errorf("IP protocol %d: not TCP, UDP or SCTP", n)
}

// AddrWords is addr as the programs hold it, read as four native-endian
// words (the layout of a __u32[4] in BPF memory).
func AddrWords(addr netip.Addr) [4]uint32 {
	b := addr.As16()
	var w [4]uint32
	for i := range w {
		w[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return w
}

// Addr is AddrWords' inverse: an IPv4-mapped address is the IPv4 address it
// maps.
func Addr(w [4]uint32) netip.Addr {
	var b [16]byte
	for i, x := range w {
		binary.NativeEndian.PutUint32(b[4*i:], x)
	}
	return netip.AddrFrom16(b).Unmap()
}

// PortWord is port in network order read as a native-endian __u16, as the
// programs compare and write it.
func PortWord(port uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], port)
	return binary.NativeEndian.Uint16(b[:])
}

// Port is PortWord's inverse.
func Port(w uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], w)
	return binary.BigEndian.Uint16(b[:])
}

// CheckFrontend validates a frontend and its backends: ports set, backends
// of the frontend's family. An IPv4 frontend is an IPv4 address (not an
// IPv4-mapped IPv6 one, which is the same frontend to the programs).
func CheckFrontend(frontend netip.AddrPort, backends []netip.AddrPort) error {
	if !frontend.IsValid() || frontend.Addr().Is4In6() || frontend.Addr().Zone() != "" {
		return fmt.Errorf("frontend %v: not an IPv4 or IPv6 address and port", frontend)
	}
	if frontend.Port() == 0 {
		return fmt.Errorf("frontend %v: port 0", frontend)
	}
	for _, be := range backends {
		if !be.IsValid() || be.Addr().Is4() != frontend.Addr().Is4() || be.Addr().Is4In6() || be.Addr().Zone() != "" {
			return fmt.Errorf("frontend %v: backend %v: not an address and port of the frontend's family", frontend, be)
		}
		if be.Port() == 0 {
			return fmt.Errorf("frontend %v: backend %v: port 0", frontend, be)
		}
	}
	return nil
}
