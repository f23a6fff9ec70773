package announce

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// validIP reports whether ip can be a LoadBalancer IP on a link.
func validIP(ip netip.Addr) bool {
	return ip.IsValid() && !ip.IsUnspecified() && !ip.IsLoopback() && !ip.IsMulticast() &&
		!ip.IsLinkLocalUnicast() && ip != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// normalize turns the caller's list into a set: IPv4-mapped IPv6 addresses
// become IPv4, zones are dropped, duplicates collapse. Invalid addresses are
// left out and named in the error (ErrInvalidIP); the rest is returned.
func normalize(ips []netip.Addr) (map[netip.Addr]struct{}, error) {
	set := make(map[netip.Addr]struct{}, len(ips))
	var errs []error
	for _, ip := range ips {
		ip = ip.Unmap().WithZone("")
		if !validIP(ip) {
			errs = append(errs, fmt.Errorf("announce %s: %w", ip, ErrInvalidIP))
			continue
		}
		set[ip] = struct{}{}
	}
	return set, errors.Join(errs...)
}

// diff returns the members of next missing from cur (added) and the members of
// cur missing from next (removed), both sorted.
func diff(cur, next map[netip.Addr]struct{}) (added, removed []netip.Addr) {
	for ip := range next {
		if _, ok := cur[ip]; !ok {
			added = append(added, ip)
		}
	}
	for ip := range cur {
		if _, ok := next[ip]; !ok {
			removed = append(removed, ip)
		}
	}
	slices.SortFunc(added, netip.Addr.Compare)
	slices.SortFunc(removed, netip.Addr.Compare)
	return added, removed
}

// sortedSet returns the members of set in ascending order.
func sortedSet(set map[netip.Addr]struct{}) []netip.Addr {
	out := make([]netip.Addr, 0, len(set))
	for ip := range set {
		out = append(out, ip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
