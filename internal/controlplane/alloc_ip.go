package controlplane

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Errors of a static (requested) allocation, worded as the apiserver's allocators.
var (
	errIPAllocated   = errors.New("provided IP is already allocated")
	errPortAllocated = errors.New("provided port is already allocated")
)

// ipRange allocates ClusterIPs from one service CIDR as the apiserver's IPAddress
// allocator does: the network address is never used, nor the IPv4 broadcast
// address; the first rangeOffset addresses (min(max(16, size/16), 256)) form a
// lower band kept for static requests, and dynamic allocation takes from the upper
// band first. Where upstream starts at a random offset, this starts at one derived
// from the Service's identity, so the result is deterministic.
type ipRange struct {
	prefix      netip.Prefix
	family      corev1.IPFamily
	first, last netip.Addr
	upper       netip.Addr // first address of the upper (dynamic) band
	size        uint64     // usable addresses, capped at MaxUint64
	offset      uint64     // size of the lower (static) band
	used        map[netip.Addr]string
}

func newIPRange(p netip.Prefix) *ipRange {
	p = p.Masked()
	r := &ipRange{prefix: p, family: corev1.IPv4Protocol, used: map[netip.Addr]string{}}
	if p.Addr().Is6() {
		r.family = corev1.IPv6Protocol
	}
	hostBits := p.Addr().BitLen() - p.Bits()
	r.first = p.Addr().Next()
	r.last = addrAdd(p.Addr(), hostMask(hostBits))
	r.size = hostMask(hostBits) // all but the network address
	if r.family == corev1.IPv4Protocol {
		r.last = r.last.Prev()
		r.size--
	}
	if hostBits >= 64 {
		r.size = math.MaxUint64
	}
	r.offset = rangeOffset(hostBits)
	r.upper = addrAdd(r.first, r.offset)
	return r
}

// hostMask is 2^bits-1, saturated at MaxUint64.
func hostMask(hostBits int) uint64 {
	if hostBits >= 64 {
		return math.MaxUint64
	}
	return 1<<uint(hostBits) - 1
}

// rangeOffset is the ipallocator's calculateRangeOffset: min(max(16, size/16), 256),
// 0 for a range of 16 addresses or fewer.
func rangeOffset(hostBits int) uint64 {
	if hostBits <= 4 {
		return 0
	}
	if hostBits >= 12 {
		return 256
	}
	return max(16, (uint64(1)<<uint(hostBits))/16)
}

// contains is true for an address the range may hand out.
func (r *ipRange) contains(a netip.Addr) bool {
	return r.prefix.Contains(a) && a.Compare(r.first) >= 0 && a.Compare(r.last) <= 0
}

// notInRange is the legacy allocator's ErrNotInRange message: it names the range,
// which the MultiCIDR allocator's "provided network does not match" does not.
func (r *ipRange) notInRange(a string) error {
	return fmt.Errorf("the provided IP (%s) is not in the valid range. The range of valid IPs is %s", a, r.prefix)
}

// claim allocates a for owner. Claiming an address owner already holds succeeds
// with isNew false.
func (r *ipRange) claim(a netip.Addr, owner string) (isNew bool, err error) {
	if !r.contains(a) {
		return false, r.notInRange(a.String())
	}
	switch held, ok := r.used[a]; {
	case !ok:
		r.used[a] = owner
		return true, nil
	case held == owner:
		return false, nil
	}
	return false, errIPAllocated
}

func (r *ipRange) release(a netip.Addr, owner string) {
	if r.used[a] == owner {
		delete(r.used, a)
	}
}

// next allocates a free address for owner, probing linearly from a start derived
// from seed: the upper band first, then the lower band. ErrRangeFull when none.
func (r *ipRange) next(seed, owner string) (netip.Addr, error) {
	upperSize := r.size - r.offset
	if a, ok := r.probe(r.upper, upperSize, seed64(seed, "upper")); ok {
		r.used[a] = owner
		return a, nil
	}
	if a, ok := r.probe(r.first, r.offset, seed64(seed, "lower")); ok {
		r.used[a] = owner
		return a, nil
	}
	return netip.Addr{}, ErrRangeFull
}

// probe looks for a free address among the n addresses from base, starting at
// seed mod n. It needs at most len(used)+1 steps, so a huge IPv6 range is cheap.
func (r *ipRange) probe(base netip.Addr, n, seed uint64) (netip.Addr, bool) {
	if n == 0 {
		return netip.Addr{}, false
	}
	start := seed % n
	steps := min(n, uint64(len(r.used))+1)
	for i := uint64(0); i < steps; i++ {
		a := addrAdd(base, (start+i)%n)
		if _, taken := r.used[a]; !taken {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// addrAdd returns a+n, wrapping within the address family.
func addrAdd(a netip.Addr, n uint64) netip.Addr {
	if a.Is4() {
		b := a.As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		v += uint32(n)
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	b := a.As16()
	var hi, lo uint64
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[i+8])
	}
	var carry uint64
	lo, carry = bits.Add64(lo, n, 0)
	hi += carry
	for i := 7; i >= 0; i-- {
		b[i], b[i+8] = byte(hi), byte(lo)
		hi >>= 8
		lo >>= 8
	}
	return netip.AddrFrom16(b)
}
