// Package ipfamily is the one IP-family type of svcnet: the model, the
// service table, every data plane, conntrack and the tracer name a family by
// it, so that no family is ever converted between packages.
//
// Its spellings at each boundary are methods: String is Kubernetes'
// ("IPv4", "IPv6", as in spec.ipFamilies and Prometheus labels), Proto the
// kernel's address family number (AF_INET, AF_INET6, which nf_tables'
// NFPROTO_IPV4/NFPROTO_IPV6 and ctnetlink's nfgen_family share).
package ipfamily

import (
	"fmt"
	"net/netip"
)

// Family is IPv4 or IPv6. The zero value is no family.
type Family uint8

// The two families. The values are the IP version numbers.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// All is both families, IPv4 first: the order every per-family loop and every
// deterministic output uses.
var All = []Family{IPv4, IPv6}

// String returns Kubernetes' name of the family: "IPv4" or "IPv6".
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

// Of returns the family of a valid address; an IPv4-mapped IPv6 address is IPv4.
func Of(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// OfPrefix returns the family of a valid prefix's address.
func OfPrefix(p netip.Prefix) Family { return Of(p.Addr()) }

// Parse returns the family Kubernetes names s ("IPv4" or "IPv6", as in
// spec.ipFamilies and an EndpointSlice's addressType).
func Parse(s string) (Family, bool) {
	switch s {
	case "IPv4":
		return IPv4, true
	case "IPv6":
		return IPv6, true
	}
	return 0, false
}

// Proto returns the kernel's number of the family: AF_INET (2) or AF_INET6
// (10), which are also NFPROTO_IPV4 and NFPROTO_IPV6 and the nfgen_family of
// a ctnetlink message.
func (f Family) Proto() uint8 {
	if f == IPv6 {
		return 10
	}
	return 2
}

// FromProto returns the family of a kernel family number (AF_INET/AF_INET6,
// NFPROTO_IPV4/NFPROTO_IPV6).
func FromProto(p uint8) (Family, bool) {
	switch p {
	case 2:
		return IPv4, true
	case 10:
		return IPv6, true
	}
	return 0, false
}

// AddrLen returns the length of an address of the family in bytes.
func (f Family) AddrLen() int {
	if f == IPv6 {
		return 16
	}
	return 4
}

// Bits returns the length of an address of the family in bits.
func (f Family) Bits() int { return 8 * f.AddrLen() }
