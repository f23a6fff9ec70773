package topology

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Twin6 is the IPv6 address of the node network with the host number of
// a, an address of the IPv4 node network: 172.26.236.x is fd00:26:236::x,
// x in hex (.177 is ::b1).
func Twin6(a netip.Addr) netip.Addr {
	b := NodeNetwork6.Addr().As16()
	b[15] = a.As4()[3]
	return netip.AddrFrom16(b)
}

// Stack is a lab's IP families, its primary first: `lab up --ip-family`
// ipv4 (IPv4), ipv6 (IPv6) or dual (IPv4, IPv6). The primary family is
// that of single-stack Services, of a pod's and a node's first address and
// of the first nameserver in resolv.conf, as the first --service-cluster-ip-range
// and --cluster-cidr make it in Kubernetes. The nil Stack is IPv4, the lab
// before it had a choice.
type Stack []ipfamily.Family

// The --ip-family spellings.
const (
	StackIPv4 = "ipv4"
	StackIPv6 = "ipv6"
	StackDual = "dual"
)

// ParseStack reads --ip-family; "" is ipv4.
func ParseStack(s string) (Stack, error) {
	switch strings.ToLower(s) {
	case "", StackIPv4:
		return Stack{ipfamily.IPv4}, nil
	case StackIPv6:
		return Stack{ipfamily.IPv6}, nil
	case StackDual:
		return Stack{ipfamily.IPv4, ipfamily.IPv6}, nil
	}
	return nil, fmt.Errorf("--ip-family %q: want %s, %s or %s", s, StackIPv4, StackIPv6, StackDual)
}

// String is the Stack's --ip-family spelling.
func (s Stack) String() string {
	switch {
	case s.Has(ipfamily.IPv4) && s.Has(ipfamily.IPv6):
		return StackDual
	case s.Has(ipfamily.IPv6):
		return StackIPv6
	}
	return StackIPv4
}

func (s Stack) families() []ipfamily.Family {
	if len(s) == 0 {
		return []ipfamily.Family{ipfamily.IPv4}
	}
	return s
}

// Primary is the first family.
func (s Stack) Primary() ipfamily.Family { return s.families()[0] }

// Has reports whether the lab has family f.
func (s Stack) Has(f ipfamily.Family) bool {
	for _, g := range s.families() {
		if g == f {
			return true
		}
	}
	return false
}

// each returns one value per family, in the Stack's order.
func each[T any](s Stack, v4, v6 func() T) []T {
	out := make([]T, 0, 2)
	for _, f := range s.families() {
		if f == ipfamily.IPv6 {
			out = append(out, v6())
		} else {
			out = append(out, v4())
		}
	}
	return out
}

func fixed[T any](v T) func() T { return func() T { return v } }

// NodeNetworks are the node network's prefixes.
func (s Stack) NodeNetworks() []netip.Prefix {
	return each(s, fixed(NodeNetwork), fixed(NodeNetwork6))
}

// Gateways are the fabric bridge's addresses, the default routes' next hops.
func (s Stack) Gateways() []netip.Addr { return s.twins(Gateway) }

// ClientAddrs are the external client's addresses.
func (s Stack) ClientAddrs() []netip.Addr { return s.twins(ClientAddr) }

// ControlAddrs are the control plane's addresses (the kube control plane).
func (s Stack) ControlAddrs() []netip.Addr { return s.twins(ControlAddr) }

// NodeAddrs are node i's addresses on the node network.
func (s Stack) NodeAddrs(i int) []netip.Addr { return s.twins(NodeAddr(i)) }

// NodeAddr is node i's address of the primary family.
func (s Stack) NodeAddr(i int) netip.Addr { return s.NodeAddrs(i)[0] }

// ClientAddr is the client's address of the primary family.
func (s Stack) ClientAddr() netip.Addr { return s.ClientAddrs()[0] }

// ControlAddr is the control plane's address of the primary family.
func (s Stack) ControlAddr() netip.Addr { return s.ControlAddrs()[0] }

// twins is a's IPv4 address and/or its IPv6 twin (Twin6).
func (s Stack) twins(a netip.Addr) []netip.Addr {
	return each(s, fixed(a), func() netip.Addr { return Twin6(a) })
}

// PodCIDRs are node i's pod CIDRs: 192.168.i.0/24, fd00:192:168:i::/64.
func (s Stack) PodCIDRs(i int) []netip.Prefix {
	return each(s, func() netip.Prefix { return PodCIDR(i) }, func() netip.Prefix { return PodCIDR6(i) })
}

// PodNetworks are the cluster's pod networks (--cluster-cidr).
func (s Stack) PodNetworks() []netip.Prefix { return each(s, fixed(PodNetwork), fixed(PodNetwork6)) }

// ServiceRanges are the Service CIDRs (--service-cluster-ip-range).
func (s Stack) ServiceRanges() []netip.Prefix {
	return each(s, fixed(ServiceRange), fixed(ServiceRange6))
}

// ClusterDNS are kube-dns's ClusterIPs, the nameservers of every pod.
func (s Stack) ClusterDNS() []netip.Addr { return each(s, fixed(ClusterDNS), fixed(ClusterDNS6)) }

// PodCIDR6 is node i's IPv6 pod CIDR: fd00:192:168:i::/64.
func PodCIDR6(i int) netip.Prefix {
	b := PodNetwork6.Addr().As16()
	b[7] = byte(i)
	return netip.PrefixFrom(netip.AddrFrom16(b), 64)
}

// Join renders a list of addresses or prefixes comma-separated, as
// Kubernetes' dual-stack flags take them.
func Join[T fmt.Stringer](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.String()
	}
	return strings.Join(parts, ",")
}
