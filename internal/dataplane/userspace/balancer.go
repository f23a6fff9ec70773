package userspace

import (
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Selection is how a proxy port chooses an endpoint for a new connection.
type Selection uint8

const (
	// RoundRobin takes the endpoints in turn (sorted by address, then port).
	RoundRobin Selection = iota
	// LeastConnections takes the endpoint with the fewest active TCP
	// connections (or UDP sessions) through this proxy port; ties go to the
	// endpoint round robin would take next.
	LeastConnections
)

func (s Selection) String() string {
	if s == LeastConnections {
		return "least-connections"
	}
	return "round-robin"
}

// affinitySweep is how many picks pass between sweeps of expired affinity
// entries, which bounds the map by the clients of one affinity timeout.
const affinitySweep = 256

// balancer chooses endpoints for one proxy port. It is safe for concurrent use.
//
// ClientIP affinity sits on top of either Selection: a client whose last
// successful connection went to an endpoint still in the set, less than the
// affinity timeout ago, goes there again; every successful connection
// refreshes the entry. An endpoint that fails to connect loses the clients
// pinned to it.
type balancer struct {
	sel Selection

	mu        sync.Mutex
	endpoints []netip.AddrPort
	next      int                    // round robin position in endpoints
	active    map[netip.AddrPort]int // open connections per endpoint, removed ones included until they end
	timeout   time.Duration          // ClientIP affinity timeout; 0: none
	affinity  map[netip.Addr]affinityEntry
	picks     int
}

type affinityEntry struct {
	ep   netip.AddrPort
	last time.Time
}

func newBalancer(sel Selection) *balancer {
	return &balancer{sel: sel, active: map[netip.AddrPort]int{}, affinity: map[netip.Addr]affinityEntry{}}
}

// set replaces the endpoints and the affinity timeout. Open connections keep
// their count; a removed endpoint is never picked again; affinity entries
// survive for endpoints still present (a timeout of 0 clears them all).
func (b *balancer) set(eps []netip.AddrPort, timeout time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.endpoints
	b.endpoints = slices.Clone(eps)
	slices.SortFunc(b.endpoints, netip.AddrPort.Compare)
	next := 0
	if len(old) > 0 && len(b.endpoints) > 0 {
		// Keep the turn: continue after the endpoint last taken, if it remains.
		prev := old[(b.next+len(old)-1)%len(old)]
		if i, ok := slices.BinarySearchFunc(b.endpoints, prev, netip.AddrPort.Compare); ok {
			next = (i + 1) % len(b.endpoints)
		}
	}
	b.next = next
	b.timeout = timeout
	if timeout == 0 {
		clear(b.affinity)
	}
	for c, e := range b.affinity {
		if !b.has(e.ep) {
			delete(b.affinity, c)
		}
	}
}

func (b *balancer) has(ep netip.AddrPort) bool {
	_, ok := slices.BinarySearchFunc(b.endpoints, ep, netip.AddrPort.Compare)
	return ok
}

// empty reports whether the port has no endpoint.
func (b *balancer) empty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.endpoints) == 0
}

// pick chooses an endpoint for client (the zero Addr: no affinity), skipping
// those in tried; false when none is left.
func (b *balancer) pick(client netip.Addr, tried []netip.AddrPort) (netip.AddrPort, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.picks++
	if b.picks%affinitySweep == 0 {
		b.sweep(now)
	}
	if b.timeout > 0 && client.IsValid() {
		if e, ok := b.affinity[client]; ok {
			if now.Sub(e.last) < b.timeout && b.has(e.ep) && !slices.Contains(tried, e.ep) {
				return e.ep, true
			}
			delete(b.affinity, client)
		}
	}
	n := len(b.endpoints)
	best := -1
	for k := range n {
		i := (b.next + k) % n
		ep := b.endpoints[i]
		if slices.Contains(tried, ep) {
			continue
		}
		if best < 0 || (b.sel == LeastConnections && b.active[ep] < b.active[b.endpoints[best]]) {
			best = i
		}
		if b.sel == RoundRobin {
			break
		}
	}
	if best < 0 {
		return netip.AddrPort{}, false
	}
	b.next = (best + 1) % n
	return b.endpoints[best], true
}

// connected records a successful connection of client to ep: one more
// active connection, and the client's affinity refreshed.
func (b *balancer) connected(client netip.Addr, ep netip.AddrPort) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active[ep]++
	if b.timeout > 0 && client.IsValid() {
		b.affinity[client] = affinityEntry{ep: ep, last: time.Now()}
	}
}

// failed records that connecting client to ep failed: the client is no
// longer pinned to it.
func (b *balancer) failed(client netip.Addr, ep netip.AddrPort) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.affinity[client]; ok && e.ep == ep {
		delete(b.affinity, client)
	}
}

// released records the end of a connection to ep.
func (b *balancer) released(ep netip.AddrPort) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active[ep] <= 1 {
		delete(b.active, ep)
		return
	}
	b.active[ep]--
}

// activeCount returns the open connections to ep.
func (b *balancer) activeCount(ep netip.AddrPort) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.active[ep]
}

func (b *balancer) sweep(now time.Time) {
	for c, e := range b.affinity {
		if now.Sub(e.last) >= b.timeout {
			delete(b.affinity, c)
		}
	}
}
