package zone

import (
	"net/netip"

	"github.com/svcnet/svcnet/internal/cowmap"
)

// addrMap maps unmapped IP addresses to values, copy-on-write (cowmap.Map):
// a View made from another by Update shares its storage. IPv4 keys are
// uint32, which the runtime hashes on its fast path: Build inserts one key
// per endpoint address, and netip.Addr keys hash several times slower.
type addrMap[V any] struct {
	v4 *cowmap.Map[uint32, V]
	v6 *cowmap.Map[[16]byte, V]
}

// newAddrMap returns an empty addrMap with room for about size IPv4 keys.
func newAddrMap[V any](size int) addrMap[V] {
	return addrMap[V]{v4: cowmap.New[uint32, V](size), v6: &cowmap.Map[[16]byte, V]{}}
}

func v4Key(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// get returns the value of a (unmapped), and whether there is one.
func (m addrMap[V]) get(a netip.Addr) (V, bool) {
	if a.Is4() {
		return m.v4.Lookup(v4Key(a))
	}
	return m.v6.Lookup(a.As16())
}

// set sets the value of a (unmapped).
func (m addrMap[V]) set(a netip.Addr, v V) {
	if a.Is4() {
		m.v4.Set(v4Key(a), v)
		return
	}
	m.v6.Set(a.As16(), v)
}

// del removes a (unmapped).
func (m addrMap[V]) del(a netip.Addr) {
	if a.Is4() {
		m.v4.Del(v4Key(a))
		return
	}
	m.v6.Del(a.As16())
}

// clone returns a private copy of m that shares m's storage until written.
func (m addrMap[V]) clone() addrMap[V] {
	return addrMap[V]{v4: m.v4.Clone(), v6: m.v6.Clone()}
}
