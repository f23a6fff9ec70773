package announce

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// Fake is an in-memory Announcer for unit tests of its callers. It keeps the
// owned set with the same rules as L2 (normalisation, invalid IPs refused and
// named in the error, the others applied) and a log of announcements: one
// entry each time an IP becomes owned or is announced again, where L2 would
// send its gratuitous announcements. It is safe for concurrent use; the zero value is ready.
type Fake struct {
	mu        sync.Mutex
	owned     map[netip.Addr]struct{}
	announced []netip.Addr
	refuse    map[netip.Addr]error
}

// Refuse makes later SetOwned calls refuse ip with err (wrapped), as L2 does
// when it cannot announce an IP (no IPv6, a failed multicast join); a nil err
// lifts the refusal. An already owned ip stays owned.
func (f *Fake) Refuse(ip netip.Addr, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse == nil {
		f.refuse = map[netip.Addr]error{}
	}
	if err == nil {
		delete(f.refuse, ip)
		return
	}
	f.refuse[ip] = err
}

// SetOwned implements Announcer.
func (f *Fake) SetOwned(ips []netip.Addr) error {
	next, err := normalize(ips)
	errs := []error{err}
	f.mu.Lock()
	defer f.mu.Unlock()
	added, removed := diff(f.owned, next)
	for _, ip := range removed {
		delete(f.owned, ip)
	}
	if f.owned == nil {
		f.owned = map[netip.Addr]struct{}{}
	}
	for _, ip := range added {
		if rerr := f.refuse[ip]; rerr != nil {
			errs = append(errs, fmt.Errorf("announce %s: %w", ip, rerr))
			continue
		}
		f.owned[ip] = struct{}{}
		f.announced = append(f.announced, ip)
	}
	return errors.Join(errs...)
}

// Owned implements Announcer.
func (f *Fake) Owned() []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedSet(f.owned)
}

// Reannounce implements Announcer: every owned IP is logged as announced
// again, in order.
func (f *Fake) Reannounce() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.announced = append(f.announced, sortedSet(f.owned)...)
}

// Announced returns the announcement log, oldest first: each IP every time it
// became owned or was announced again (Reannounce).
func (f *Fake) Announced() []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.announced)
}
