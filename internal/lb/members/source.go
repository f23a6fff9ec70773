package members

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// msgWriter is the part of *net.UDPConn that sends with ancillary data.
type msgWriter interface {
	WriteMsgUDPAddrPort(b, oob []byte, addr netip.AddrPort) (n, oobn int, err error)
}

// sourceFor returns the first of self in dst's family, or the zero Addr.
func sourceFor(self []netip.Addr, dst netip.Addr) netip.Addr {
	for _, a := range self {
		if a.Is4() == dst.Is4() {
			return a
		}
	}
	return netip.Addr{}
}

// send writes pkt to dst. With a valid src and a conn that can take ancillary
// data (a *net.UDPConn), the datagram leaves from src (IP_PKTINFO for IPv4, also
// on a dual-stack IPv6 socket; IPV6_PKTINFO for IPv6); if the kernel refuses that
// source (not a local address), it is sent from the kernel's choice instead.
func send(conn net.PacketConn, pkt []byte, dst netip.AddrPort, src netip.Addr) error {
	var first error
	if mw, ok := conn.(msgWriter); ok && src.IsValid() {
		var oob []byte
		if src.Is4() {
			oob = (&ipv4.ControlMessage{Src: src.AsSlice()}).Marshal()
		} else {
			oob = (&ipv6.ControlMessage{Src: src.AsSlice()}).Marshal()
		}
		_, _, err := mw.WriteMsgUDPAddrPort(pkt, oob, dst)
		if err == nil {
			return nil
		}
		first = fmt.Errorf("from %s: %w", src, err)
	}
	if _, err := conn.WriteTo(pkt, net.UDPAddrFromAddrPort(dst)); err != nil {
		return errors.Join(first, err)
	}
	return nil
}
