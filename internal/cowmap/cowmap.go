// Package cowmap is a map for immutable snapshots that share storage: a
// Clone copies a table of shards (2 KB), and its first write to a shard
// copies that shard alone. A snapshot that copied its maps whole on every
// change would cost each change time and garbage linear in the number of
// objects: at 10,000 Services, 1.5 MB per one-object change of the model
// store (BenchmarkStoreUpdate10k in internal/model).
package cowmap

import (
	"hash/maphash"
	"iter"
	"maps"
)

// Shards is the number of shards of a Map: at 10k objects a shard holds
// about 40, so a one-object change copies a few KB.
const Shards = 256

// seed spreads keys over shards (per process).
var seed = maphash.MakeSeed()

// Map is a map split into Shards shards by key hash.
//
// Contract: a Map is either published (part of a snapshot: read only, safe
// for concurrent readers) or the private copy of one writer, from Clone;
// only a private copy is written. The zero value is an empty map, writable.
type Map[K comparable, V any] struct {
	shards [Shards]map[K]V
	// owned marks the shards this copy made since clone: only those may be
	// written in place.
	owned [Shards / 64]uint64
	n     int
}

// New returns an empty Map, writable, with room for about size keys
// without growing: for a Map filled at once.
func New[K comparable, V any](size int) *Map[K, V] {
	m := &Map[K, V]{}
	per := size/Shards + 1
	for i := range m.shards {
		m.shards[i] = make(map[K]V, per)
	}
	for i := range m.owned {
		m.owned[i] = ^uint64(0)
	}
	return m
}

func shardOf[K comparable](k K) int {
	return int(maphash.Comparable(seed, k) % Shards)
}

// Get returns the value of k (the zero value if absent).
func (m *Map[K, V]) Get(k K) V {
	return m.shards[shardOf(k)][k]
}

// Lookup returns the value of k and whether it is present.
func (m *Map[K, V]) Lookup(k K) (V, bool) {
	v, ok := m.shards[shardOf(k)][k]
	return v, ok
}

// Len returns the number of keys.
func (m *Map[K, V]) Len() int { return m.n }

// All yields every key and value, in no particular order.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, s := range m.shards {
			for k, v := range s {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// Clone returns a private copy of m that shares m's shards until written.
func (m *Map[K, V]) Clone() *Map[K, V] {
	return &Map[K, V]{shards: m.shards, n: m.n}
}

// writable returns shard i of a private copy, copying it first if it is
// still shared.
func (m *Map[K, V]) writable(i int) map[K]V {
	if m.owned[i/64]&(1<<(i%64)) == 0 {
		m.shards[i] = maps.Clone(m.shards[i])
		if m.shards[i] == nil {
			m.shards[i] = map[K]V{}
		}
		m.owned[i/64] |= 1 << (i % 64)
	}
	return m.shards[i]
}

// Set sets k to v (private copies only).
func (m *Map[K, V]) Set(k K, v V) {
	s := m.writable(shardOf(k))
	if _, ok := s[k]; !ok {
		m.n++
	}
	s[k] = v
}

// Del removes k (private copies only); an absent k is ignored.
func (m *Map[K, V]) Del(k K) {
	i := shardOf(k)
	if _, ok := m.shards[i][k]; !ok {
		return
	}
	delete(m.writable(i), k)
	m.n--
}
