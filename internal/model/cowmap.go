package model

import (
	"hash/maphash"
	"iter"
	"maps"
)

// cowShards is the number of shards of a cowMap: at 10k objects a shard holds
// about 40, so a one-object change copies a few KB.
const cowShards = 256

// cowSeed spreads keys over shards (per process).
var cowSeed = maphash.MakeSeed()

// cowMap is a map split into cowShards shards by key hash, for snapshots that
// share storage: clone copies the shard table only (2 KB), and the first write
// to a shard of the copy copies that shard alone. Snapshots would otherwise
// copy each of their maps whole per transaction: at 10k Services, 1.5 MB of
// garbage for every one-object change, most of what a node agent allocates.
//
// Contract: a cowMap is either published (part of a Snapshot: read only, safe
// for concurrent readers) or the private copy of one Txn, from clone; only a
// private copy is written. The zero value is an empty map, writable.
type cowMap[K comparable, V any] struct {
	shards [cowShards]map[K]V
	// owned marks the shards this copy made since clone: only those may be
	// written in place.
	owned [cowShards / 64]uint64
	n     int
}

func shardOf[K comparable](k K) int {
	return int(maphash.Comparable(cowSeed, k) % cowShards)
}

// get returns the value of k (the zero value if absent).
func (m *cowMap[K, V]) get(k K) V {
	return m.shards[shardOf(k)][k]
}

// lookup returns the value of k and whether it is present.
func (m *cowMap[K, V]) lookup(k K) (V, bool) {
	v, ok := m.shards[shardOf(k)][k]
	return v, ok
}

// len returns the number of keys.
func (m *cowMap[K, V]) len() int { return m.n }

// all yields every key and value, in no particular order.
func (m *cowMap[K, V]) all() iter.Seq2[K, V] {
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

// clone returns a private copy of m that shares m's shards until written.
func (m *cowMap[K, V]) clone() *cowMap[K, V] {
	return &cowMap[K, V]{shards: m.shards, n: m.n}
}

// writable returns shard i of a private copy, copying it first if it is
// still shared.
func (m *cowMap[K, V]) writable(i int) map[K]V {
	if m.owned[i/64]&(1<<(i%64)) == 0 {
		m.shards[i] = maps.Clone(m.shards[i])
		if m.shards[i] == nil {
			m.shards[i] = map[K]V{}
		}
		m.owned[i/64] |= 1 << (i % 64)
	}
	return m.shards[i]
}

// set sets k to v (private copies only).
func (m *cowMap[K, V]) set(k K, v V) {
	s := m.writable(shardOf(k))
	if _, ok := s[k]; !ok {
		m.n++
	}
	s[k] = v
}

// del removes k (private copies only); an absent k is ignored.
func (m *cowMap[K, V]) del(k K) {
	i := shardOf(k)
	if _, ok := m.shards[i][k]; !ok {
		return
	}
	delete(m.writable(i), k)
	m.n--
}
