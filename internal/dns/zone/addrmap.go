package zone

import (
	"maps"
	"net/netip"
)

// addrMap maps unmapped IP addresses to values. IPv4 keys are uint32, which the
// runtime hashes on its fast path: Build inserts one key per endpoint address,
// and netip.Addr keys hash several times slower.
type addrMap[V any] struct {
	v4 map[uint32]V
	v6 map[[16]byte]V
}

func newAddrMap[V any](size int) addrMap[V] {
	return addrMap[V]{v4: make(map[uint32]V, size), v6: map[[16]byte]V{}}
}

// get returns the value of a (unmapped), and whether there is one.
func (m addrMap[V]) get(a netip.Addr) (V, bool) {
	if a.Is4() {
		b := a.As4()
		v, ok := m.v4[uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])]
		return v, ok
	}
	v, ok := m.v6[a.As16()]
	return v, ok
}

// set sets the value of a (unmapped).
func (m addrMap[V]) set(a netip.Addr, v V) {
	if a.Is4() {
		b := a.As4()
		m.v4[uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])] = v
		return
	}
	m.v6[a.As16()] = v
}

// del removes a (unmapped).
func (m addrMap[V]) del(a netip.Addr) {
	if a.Is4() {
		b := a.As4()
		delete(m.v4, uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))
		return
	}
	delete(m.v6, a.As16())
}

// clone returns a copy of m that shares no map with it.
func (m addrMap[V]) clone() addrMap[V] {
	return addrMap[V]{v4: maps.Clone(m.v4), v6: maps.Clone(m.v6)}
}
