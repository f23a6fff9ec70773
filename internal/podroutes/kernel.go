package podroutes

import "net/netip"

// Kernel is the routing table as podroutes needs it: svcnet's routes in the
// main table and the interfaces' addresses. Implementations: Netlink, Fake.
type Kernel interface {
	// List returns svcnet's routes (protocol Protocol, main table), both
	// families, sorted by destination. Nobody else's routes are listed.
	List() ([]Route, error)
	// Add creates r with protocol Protocol. It never replaces: when a route to
	// r.Dst (at the default metric) exists, whoever owns it, it fails with an
	// error wrapping ErrExists and changes nothing.
	Add(r Route) error
	// Replace atomically makes svcnet's existing route to r.Dst lead via
	// r.Via (or creates it when it is gone). Callers use it only for a
	// destination List returned: the kernel replaces whatever route holds the
	// key, so on any other it could overwrite somebody else's.
	Replace(r Route) error
	// Delete removes svcnet's route to r.Dst via r.Via. A route that is gone,
	// or that is not svcnet's, is not touched and not an error.
	Delete(r Route) error
	// LocalAddrs returns the interfaces' addresses with their prefix lengths
	// (as on the interface, not masked), leaving out host-scope ones (loopback).
	LocalAddrs() ([]netip.Prefix, error)
}
