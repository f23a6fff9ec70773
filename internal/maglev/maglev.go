// Package maglev builds Maglev lookup tables (Eisenbud et al., "Maglev: A
// Fast and Reliable Software Network Load Balancer", NSDI 2016), as Cilium
// and Katran do for their per-Service backend tables: each backend's
// preference list is a permutation of the table's M slots (an offset and a
// skip from two hashes of the backend's name), and the backends take turns
// claiming their next preferred free slot until every slot has one. Every
// node that builds the table of the same backends gets the same table, so a
// flow hashed into it finds the same backend whichever node it enters, and
// a backend change moves few flows besides the removed backend's own.
package maglev

import (
	"fmt"
	"hash/fnv"
)

// Sizes Cilium offers for M (primes); SizeDefault is Cilium's default.
const (
	SizeDefault = 16381
	SizeLarge   = 65537
)

// Table returns the lookup table of m slots (a prime larger than the number
// of backends) for backends, named by a stable identity (their address and
// port): slot i holds the index in backends of the backend flows hashed to i
// go to. The table depends on the names and their order; give them sorted.
func Table(backends []string, m int) ([]uint32, error) {
	n := len(backends)
	if n == 0 {
		return nil, fmt.Errorf("maglev: no backends")
	}
	if m <= n || !prime(m) {
		return nil, fmt.Errorf("maglev: table size %d: want a prime above the %d backends", m, n)
	}
	offset := make([]uint64, n)
	skip := make([]uint64, n)
	for i, b := range backends {
		offset[i] = hash(b, 0) % uint64(m)
		skip[i] = hash(b, 1)%uint64(m-1) + 1
	}
	next := make([]uint64, n)
	const free = ^uint32(0)
	table := make([]uint32, m)
	for i := range table {
		table[i] = free
	}
	for filled := 0; ; {
		for i := range n {
			c := (offset[i] + next[i]*skip[i]) % uint64(m)
			for table[c] != free {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % uint64(m)
			}
			table[c] = uint32(i)
			next[i]++
			if filled++; filled == m {
				return table, nil
			}
		}
	}
}

// hash is FNV-1a of salt and name: stable across processes and nodes.
func hash(name string, salt byte) uint64 {
	h := fnv.New64a()
	h.Write([]byte{salt})
	h.Write([]byte(name))
	return h.Sum64()
}

func prime(m int) bool {
	if m < 2 {
		return false
	}
	for d := 2; d*d <= m; d++ {
		if m%d == 0 {
			return false
		}
	}
	return true
}
