package conntrack

import (
	"fmt"
	"net/netip"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// IANA protocol numbers (the same values as unix.IPPROTO_*).
const (
	ProtoTCP  uint8 = 6
	ProtoUDP  uint8 = 17
	ProtoSCTP uint8 = 132
)

// Cleanable reports whether flows of protocol proto are ever judged stale:
// UDP and SCTP only. Upstream kube-proxy (v1.36) cleans UDP alone; SCTP is
// cleaned here too because its conntrack entries pin the DNAT target the same
// way (older kube-proxy releases cleared SCTP as well). A caller that wants
// kube-proxy's exact behaviour simply puts no SCTP frontends in its Want.
func Cleanable(proto uint8) bool { return proto == ProtoUDP || proto == ProtoSCTP }

// Frontend is one place a service port receives traffic: a ClusterIP,
// external IP or load-balancer IP with the service port, or, with Addr left
// invalid (the zero netip.Addr), a NodePort on any destination address.
type Frontend struct {
	Proto uint8
	Addr  netip.Addr
	Port  uint16
}

func (f Frontend) String() string {
	if !f.Addr.IsValid() {
		return fmt.Sprintf("%s *:%d", protoName(f.Proto), f.Port)
	}
	return fmt.Sprintf("%s %s", protoName(f.Proto), netip.AddrPortFrom(f.Addr, f.Port))
}

// Want is the desired state: every frontend of every UDP/SCTP service port,
// mapped to the endpoints (IP and target port) that may serve it. An endpoint
// serves when its value is true; false counts as absent.
//
// Which endpoints to list: all serving ones (ready, or serving and
// terminating), regardless of traffic policy and topology, as kube-proxy
// does; changing a policy must not break existing flows.
//
// Put every frontend in, including those with no serving endpoints: an
// address-specific frontend takes precedence over a NodePort frontend
// (invalid Addr) with the same protocol and port, even when it has no
// endpoints. Build a Want with Add, which normalises addresses; keys written
// by hand must hold unmapped addresses (netip.Addr.Unmap).
type Want map[Frontend]map[netip.AddrPort]bool

// Add records frontend f with serving endpoints eps (more calls add more
// endpoints). It unmaps 4-in-6 addresses and never stores a zone.
func (w Want) Add(f Frontend, eps ...netip.AddrPort) {
	if f.Addr.IsValid() {
		f.Addr = f.Addr.Unmap().WithZone("")
	}
	set := w[f]
	if set == nil {
		set = make(map[netip.AddrPort]bool, len(eps))
		w[f] = set
	}
	for _, ep := range eps {
		set[normAddrPort(ep)] = true
	}
}

// families returns the families of all serving endpoints in w, ipfamily.IPv4 first:
// no flow of another family can be stale.
func (w Want) families() []ipfamily.Family {
	var v4, v6 bool
	for _, eps := range w {
		for ep, ok := range eps {
			if !ok {
				continue
			}
			if ipfamily.Of(ep.Addr()) == ipfamily.IPv4 {
				v4 = true
			} else {
				v6 = true
			}
		}
	}
	var out []ipfamily.Family
	if v4 {
		out = append(out, ipfamily.IPv4)
	}
	if v6 {
		out = append(out, ipfamily.IPv6)
	}
	return out
}

// Flow is one conntrack entry, as far as cleanup cares.
//
// Orig is the direction of the first packet (client to frontend); Reply is
// the direction the kernel expects answers in, so ReplySrc is the endpoint
// the flow was DNATed to (or the frontend itself when it was not DNATed).
// ID and Zone identify the kernel entry: Netlink.Delete deletes an entry only
// if its ID still matches (0 means "any"), so a flow re-created since List is
// never deleted by mistake.
type Flow struct {
	Proto    uint8
	OrigSrc  netip.AddrPort
	OrigDst  netip.AddrPort
	ReplySrc netip.AddrPort
	ReplyDst netip.AddrPort
	Zone     uint16
	ID       uint32
}

// ipfamily.Family returns the flow's IP family.
func (f Flow) Family() ipfamily.Family { return ipfamily.Of(f.OrigSrc.Addr()) }

func (f Flow) String() string {
	s := fmt.Sprintf("%s %s->%s reply %s->%s", protoName(f.Proto), f.OrigSrc, f.OrigDst, f.ReplySrc, f.ReplyDst)
	if f.Zone != 0 {
		s += fmt.Sprintf(" zone=%d", f.Zone)
	}
	return s
}

// Stale reports whether flow should be deleted under want: it is a UDP or
// SCTP flow whose original destination is a frontend in want (address and
// port, else any address and the port: a NodePort), that frontend has at
// least one serving endpoint of the flow's family, and the flow's reply
// source (the DNAT target) is not one of them.
//
// So a flow to a frontend without endpoints is kept (kube-proxy skips such
// services: nothing better exists to send it to), and once endpoints appear,
// flows that were never DNATed (reply source = the frontend itself, created
// while the service had none) are stale, as kube-proxy deletes them.
//
// Deliberate differences from kube-proxy, both making Stale delete less:
// an address-specific frontend shadows a NodePort frontend with the same
// port (kube-proxy checks both and deletes a healthy ClusterIP flow whose
// port happens to equal another service's NodePort), and only endpoints of
// the flow's family count (kube-proxy runs per family).
func Stale(flow Flow, want Want) bool {
	if !Cleanable(flow.Proto) {
		return false
	}
	dst := normAddrPort(flow.OrigDst)
	eps, ok := want[Frontend{Proto: flow.Proto, Addr: dst.Addr(), Port: dst.Port()}]
	if !ok {
		eps, ok = want[Frontend{Proto: flow.Proto, Port: dst.Port()}]
	}
	if !ok || eps[normAddrPort(flow.ReplySrc)] {
		return false
	}
	return hasServing(eps, ipfamily.Of(dst.Addr()))
}

// hasServing reports whether eps holds a serving endpoint of family fam. It
// usually returns at the first element (sets rarely mix families).
func hasServing(eps map[netip.AddrPort]bool, fam ipfamily.Family) bool {
	for ep, ok := range eps {
		if ok && ipfamily.Of(ep.Addr()) == fam {
			return true
		}
	}
	return false
}

func normAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}

func protoName(p uint8) string {
	if n, ok := nft.ProtoName(p); ok {
		return n
	}
	return fmt.Sprintf("proto(%d)", p)
}
