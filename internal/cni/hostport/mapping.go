package hostport

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// Mapping is one port mapping: traffic to HostPort/Protocol on HostIP (every
// local address of the node when HostIP is invalid) goes to ContainerPort of
// the pod's address of the same family.
type Mapping struct {
	HostIP        netip.Addr
	HostPort      uint16
	Protocol      uint8 // nft.ProtoTCP, nft.ProtoUDP or nft.ProtoSCTP
	ContainerPort uint16
}

// Applies reports whether the mapping applies to family f: a mapping without
// HostIP applies to both.
func (m Mapping) Applies(f ipfamily.Family) bool {
	return !m.HostIP.IsValid() || familyOf(m.HostIP) == f
}

// String renders the mapping as "[hostIP:]hostPort/proto->containerPort".
func (m Mapping) String() string {
	host := strconv.Itoa(int(m.HostPort))
	if m.HostIP.IsValid() {
		host = netip.AddrPortFrom(m.HostIP, m.HostPort).String()
	}
	return host + "/" + ProtocolName(m.Protocol) + "->" + strconv.Itoa(int(m.ContainerPort))
}

// ParseProtocol returns the protocol number of "tcp", "udp" or "sctp" (any
// case); "" means tcp, as in Kubernetes.
func ParseProtocol(s string) (uint8, error) {
	switch strings.ToLower(s) {
	case "", "tcp":
		return nft.ProtoTCP, nil
	case "udp":
		return nft.ProtoUDP, nil
	case "sctp":
		return nft.ProtoSCTP, nil
	}
	return 0, fmt.Errorf("protocol %q: want tcp, udp or sctp", s)
}

// ProtocolName returns "tcp", "udp" or "sctp".
func ProtocolName(p uint8) string {
	switch p {
	case nft.ProtoTCP:
		return "tcp"
	case nft.ProtoUDP:
		return "udp"
	case nft.ProtoSCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

func familyOf(a netip.Addr) ipfamily.Family {
	if a.Is4() {
		return ipfamily.IPv4
	}
	return ipfamily.IPv6
}
