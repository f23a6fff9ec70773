// Package alloc is svcnet lb's address allocator: given the address pools and the
// LoadBalancer Services, it decides which external IPs (or the nodes' own addresses)
// each Service gets. It is pure and deterministic: no I/O, no clock, no randomness,
// and the same pools and Services in any order give the same Result.
//
// Every call is a full recompute that is stable. A Service keeps its current IPs
// while they stay valid, so a restarted controller, or a change to an unrelated
// Service, moves nothing. The semantics are MetalLB's (pools of CIDRs and ranges,
// auto-assign, priorities, namespace and label limits, requested IPs and pools, IP
// sharing by key); where MetalLB leaves a choice open, Allocate's doc decides it.
package alloc

import (
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// Mode is how a pool's Services are reached.
type Mode string

const (
	// ModeL2 pools hand out their own addresses, announced by ARP/NDP.
	ModeL2 Mode = "l2"
	// ModeNodeIP pools have no addresses: their Services are reached on the nodes'
	// own addresses (as k3s servicelb), so they share every node address.
	ModeNodeIP Mode = "node-ip"
)

// Range is an inclusive range of addresses of one family, First <= Last.
type Range struct{ First, Last netip.Addr }

// String returns "first-last", or the single address when First == Last.
func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// Contains reports whether a lies in r (same family, First <= a <= Last).
func (r Range) Contains(a netip.Addr) bool {
	return a.Is4() == r.First.Is4() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Overlaps reports whether r and o share an address.
func (r Range) Overlaps(o Range) bool {
	return r.First.Is4() == o.First.Is4() && r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

// Family returns the range's IP family.
func (r Range) Family() ipfamily.Family { return ipfamily.Of(r.First) }

// PrefixRange returns the addresses of a prefix, from its network address to its
// last (broadcast) address.
func PrefixRange(p netip.Prefix) Range {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := range b {
		hostBits := min(max(p.Bits()-i*8, 0), 8) // prefix bits within byte i
		b[i] |= byte(0xff >> hostBits)
	}
	last, _ := netip.AddrFromSlice(b)
	return Range{First: p.Addr(), Last: last}
}

// Intersect returns the addresses r and o share; ok is false when they share none.
func (r Range) Intersect(o Range) (Range, bool) {
	if !r.Overlaps(o) {
		return Range{}, false
	}
	out := r
	if o.First.Compare(out.First) > 0 {
		out.First = o.First
	}
	if o.Last.Compare(out.Last) < 0 {
		out.Last = o.Last
	}
	return out, true
}

// Reserved is a block of the cluster's own addresses (a node's address, a pod
// CIDR, a service CIDR): never a LoadBalancer Service's address.
type Reserved struct {
	Range Range
	// What names the block for messages, e.g. "Node node3's InternalIP
	// 172.26.236.179" or "the service CIDR 10.96.0.0/12".
	What string
}

// Pool is a validated address pool (pool.Parse builds one from an IPAddressPool).
//
// Constraints: every non-empty constraint must admit a Service for the pool to be
// eligible for it (Namespaces: its namespace is listed; NamespaceSelectors: one of
// them matches its namespace's labels; ServiceSelectors: one of them matches its
// labels). No constraint at all admits every Service. A nil selector matches
// nothing.
type Pool struct {
	Name string
	// Ranges are the pool's addresses, non-overlapping; empty in ModeNodeIP.
	Ranges []Range
	// AutoAssign: the pool serves Services that ask for no pool and no IP. When
	// false it serves only Services that name it or one of its IPs.
	AutoAssign bool
	Mode       Mode
	// Priority orders auto-assign pools: lower first, but 0 (unset) after all others.
	Priority           int
	Namespaces         []string
	NamespaceSelectors []labels.Selector
	ServiceSelectors   []labels.Selector
	// Excluded are reserved blocks that came to lie in Ranges after the pool was
	// admitted (pool.Admit refuses a new pool that holds any). Their addresses
	// are never newly given to a Service, requested or not; a Service that
	// already holds one keeps it (the conflict is reported on the pool).
	Excluded []Reserved
}

// Port is one (protocol, port) a Service listens on.
type Port struct {
	Protocol model.Protocol
	Port     int32
}

// String returns "TCP/80".
func (p Port) String() string { return fmt.Sprintf("%s/%d", p.Protocol, p.Port) }

// Service is what the allocator needs of one LoadBalancer Service of our class.
type Service struct {
	Key model.ServiceKey
	// Created orders Services: the older one wins a clash.
	Created         time.Time
	Labels          map[string]string
	NamespaceLabels map[string]string
	// Families is spec.ipFamilies, primary first; empty means [IPv4].
	Families []ipfamily.Family
	// PreferDualStack is ipFamilyPolicy PreferDualStack: a second family that cannot
	// be had (the pool has no free address of it) is left out, not an error.
	PreferDualStack bool
	Ports           []Port
	// RequestedIPs are the IPs the Service asks for (annotation
	// svcnet.io/loadBalancerIPs, or spec.loadBalancerIP): at most one per family.
	RequestedIPs []netip.Addr
	// RequestedPool is the pool the Service asks for (svcnet.io/address-pool).
	RequestedPool string
	// SharingKey is svcnet.io/allow-shared-ip: Services with the same non-empty key
	// may share an IP when their ports do not clash.
	SharingKey string
	// TrafficPolicyLocal is externalTrafficPolicy Local. Such a Service shares an IP
	// only with Services of the same Selector, as the node that announces the IP
	// must have endpoints of every Service on it.
	TrafficPolicyLocal bool
	Selector           map[string]string
	// Current are the IPs in status.loadBalancer.ingress now; they are kept while
	// still valid.
	Current []netip.Addr
}

// Assignment is what one Service got.
type Assignment struct {
	Pool string
	Mode Mode
	// IPs are sorted, one per family; empty in ModeNodeIP (the Service is reached
	// on the nodes' addresses, which the caller knows).
	IPs []netip.Addr
}

// Result is the outcome of Allocate. Every input Service is in exactly one map.
type Result struct {
	Assigned map[model.ServiceKey]Assignment
	// Pending holds why a Service got nothing; the error wraps one of the
	// sentinels of this package.
	Pending map[model.ServiceKey]error
}
