package podroutes

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// Fake is a Kernel that keeps a routing table in memory with the kernel's
// rules for what podroutes does: one route per destination, Add fails on any
// existing one, Replace overwrites whatever holds the destination (svcnet's or
// not, as the kernel does), Delete removes only svcnet's exact route. It is
// safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	routes map[netip.Prefix]FakeRoute
	local  []netip.Prefix
	// FailOn, if set, is asked before every change ("add", "replace",
	// "delete"); an error it returns fails that call and changes nothing.
	FailOn func(op string, r Route) error
}

// FakeRoute is one route of a Fake's table with its owner's protocol.
type FakeRoute struct {
	Dst      netip.Prefix
	Via      netip.Addr
	Protocol int
}

var _ Kernel = (*Fake)(nil)

// NewFake returns a Fake whose interfaces have the addresses local.
func NewFake(local ...netip.Prefix) *Fake {
	return &Fake{routes: map[netip.Prefix]FakeRoute{}, local: local}
}

// SetLocal sets the interfaces' addresses.
func (f *Fake) SetLocal(local ...netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.local = slices.Clone(local)
}

// Put installs a route with any protocol, as another program (or a previous
// svcnet, with Protocol) would have.
func (f *Fake) Put(r FakeRoute) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Dst = r.Dst.Masked()
	f.routes[r.Dst] = r
}

// Table returns every route, svcnet's and others', sorted by destination.
func (f *Fake) Table() []FakeRoute {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]FakeRoute, 0, len(f.routes))
	for _, r := range f.routes {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b FakeRoute) int {
		return compareRoutes(Route{Dst: a.Dst, Via: a.Via}, Route{Dst: b.Dst, Via: b.Via})
	})
	return out
}

func (f *Fake) List() ([]Route, error) {
	var out []Route
	for _, r := range f.Table() {
		if r.Protocol == Protocol {
			out = append(out, Route{Dst: r.Dst, Via: r.Via})
		}
	}
	return out, nil
}

func (f *Fake) fail(op string, r Route) error {
	if f.FailOn == nil {
		return nil
	}
	if err := f.FailOn(op, r); err != nil {
		return fmt.Errorf("%s route %s: %w", op, r, err)
	}
	return nil
}

func (f *Fake) Add(r Route) error {
	if err := f.fail("add", r); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.routes[r.Dst]; ok {
		return fmt.Errorf("add route %s: %w", r, ErrExists)
	}
	f.routes[r.Dst] = FakeRoute{Dst: r.Dst, Via: r.Via, Protocol: Protocol}
	return nil
}

func (f *Fake) Replace(r Route) error {
	if err := f.fail("replace", r); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[r.Dst] = FakeRoute{Dst: r.Dst, Via: r.Via, Protocol: Protocol}
	return nil
}

func (f *Fake) Delete(r Route) error {
	if err := f.fail("delete", r); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.routes[r.Dst]; ok && cur.Protocol == Protocol && cur.Via == r.Via {
		delete(f.routes, r.Dst)
	}
	return nil
}

func (f *Fake) LocalAddrs() ([]netip.Prefix, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.local), nil
}
