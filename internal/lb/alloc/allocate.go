package alloc

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// Allocate assigns addresses to every Service from the pools. It is pure and
// deterministic: the order of pools and svcs does not matter. Preconditions: pool
// names and Service keys are unique (of duplicates, the first by name, or by
// (Created, Key), is used); pools do not overlap (pool.Admit refuses those that do).
//
// The recompute is stable, in two passes over the Services in (Created, Key) order:
//
//  1. Keep. A Service keeps its Current IPs when they are all still valid: at most
//     one per family and only of its families, covering its required families
//     (the primary; the second too unless PreferDualStack), all in one l2 pool it
//     may use (its RequestedPool if set, else any pool whose constraints admit it,
//     auto-assign or not, as MetalLB keeps them), equal to its RequestedIPs of those
//     families, and shareable with the Services that kept them before it. So the
//     older of two Services holding the same IP without sharing keeps it.
//  2. Assign. Every other Service gets, per family, its requested IP, else the
//     lowest free address (with a sharing key: the lowest address already shared
//     under that key that it may share, first) of one pool: the pool holding its
//     requested IPs, else its requested pool, else the first eligible auto-assign
//     pool (by Priority with 0 last, then Name) that can serve all its required
//     families. No Service is newly given one of a pool's Excluded addresses,
//     requested, free or shared (pass 1 keeps them where a Service holds one). A kept PreferDualStack Service missing its second family gets one
//     from its pool when there is a free one. A node-ip pool gives no IPs; its
//     Services clash when they share a family and a (protocol, port), and the
//     later one pends.
//
// A Service that gets nothing is in Pending with an error wrapping a sentinel of
// this package; it holds nothing, so it blocks no other Service.
func Allocate(pools []Pool, svcs []Service) Result {
	a := newAllocator(pools)
	order := normalize(svcs)
	res := Result{Assigned: map[model.ServiceKey]Assignment{}, Pending: map[model.ServiceKey]error{}}
	kept := map[model.ServiceKey]*Assignment{}
	for _, s := range order {
		if as := a.keep(s); as != nil {
			kept[s.Key] = as
		}
	}
	for _, s := range order {
		if as := kept[s.Key]; as != nil {
			a.complete(s, as)
			res.Assigned[s.Key] = *as
			continue
		}
		as, err := a.assign(s)
		if err != nil {
			res.Pending[s.Key] = err
			continue
		}
		res.Assigned[s.Key] = as
	}
	return res
}

// allocator holds the pools (sorted by name, ranges sorted) and the state.
type allocator struct {
	pools  []*Pool
	byName map[string]*Pool
	st     *state
}

func newAllocator(pools []Pool) *allocator {
	a := &allocator{byName: map[string]*Pool{}, st: newState()}
	for i := range pools {
		p := pools[i]
		p.Ranges = slices.Clone(p.Ranges)
		slices.SortFunc(p.Ranges, func(x, y Range) int { return x.First.Compare(y.First) })
		a.pools = append(a.pools, &p)
	}
	slices.SortStableFunc(a.pools, func(x, y *Pool) int { return cmp.Compare(x.Name, y.Name) })
	a.pools = slices.CompactFunc(a.pools, func(x, y *Pool) bool { return x.Name == y.Name })
	for _, p := range a.pools {
		a.byName[p.Name] = p
	}
	return a
}

// normalize copies the Services in (Created, Key) order, dropping later duplicate
// keys, with Families defaulted to [IPv4] and addresses unmapped.
func normalize(svcs []Service) []*Service {
	out := make([]*Service, 0, len(svcs))
	for i := range svcs {
		s := svcs[i]
		if len(s.Families) == 0 {
			s.Families = []ipfamily.Family{ipfamily.IPv4}
		}
		s.RequestedIPs = unmapAll(s.RequestedIPs)
		s.Current = unmapAll(s.Current)
		out = append(out, &s)
	}
	slices.SortStableFunc(out, func(x, y *Service) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Key.Namespace, y.Key.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(x.Key.Name, y.Key.Name)
	})
	seen := map[model.ServiceKey]bool{}
	return slices.DeleteFunc(out, func(s *Service) bool {
		dup := seen[s.Key]
		seen[s.Key] = true
		return dup
	})
}

func unmapAll(ips []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		if ip.IsValid() {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// byFamily maps each address to its family; ok is false when two share a family
// or one is of a family s does not have.
func byFamily(s *Service, ips []netip.Addr) (m map[ipfamily.Family]netip.Addr, ok bool) {
	m = map[ipfamily.Family]netip.Addr{}
	for _, ip := range ips {
		f := ipfamily.Of(ip)
		if _, dup := m[f]; dup || !slices.Contains(s.Families, f) {
			return nil, false
		}
		m[f] = ip
	}
	return m, true
}

// required reports whether the i-th family of s must be served.
func required(s *Service, i int) bool { return i == 0 || !s.PreferDualStack }

// keep claims s's Current IPs when they are still valid (pass 1 of Allocate) and
// returns the Assignment, or nil.
func (a *allocator) keep(s *Service) *Assignment {
	if len(s.Current) == 0 {
		return nil
	}
	cur, ok := byFamily(s, s.Current)
	if !ok {
		return nil
	}
	req, ok := byFamily(s, s.RequestedIPs)
	if !ok {
		return nil
	}
	for i, f := range s.Families {
		if _, has := cur[f]; !has && required(s, i) {
			return nil
		}
	}
	for f, ip := range req {
		if cur[f] != ip {
			return nil
		}
	}
	var pool *Pool
	for _, p := range a.pools {
		if p.Mode == ModeL2 && (s.RequestedPool == "" || p.Name == s.RequestedPool) && p.allows(s) && holdsAll(p, s.Current) {
			pool = p
			break
		}
	}
	if pool == nil {
		return nil
	}
	for _, ip := range s.Current {
		if a.st.canShare(ip, s) != nil {
			return nil
		}
	}
	for _, ip := range s.Current {
		a.st.claim(ip, s)
	}
	return &Assignment{Pool: pool.Name, Mode: ModeL2, IPs: sorted(s.Current)}
}

// complete adds to a kept PreferDualStack Service the second family it lacks, when
// its pool has a free address of it.
func (a *allocator) complete(s *Service, as *Assignment) {
	cur, _ := byFamily(s, as.IPs)
	p := a.byName[as.Pool]
	for _, f := range s.Families {
		if _, has := cur[f]; has {
			continue
		}
		if ip, ok := a.st.free(p, f == ipfamily.IPv4, s); ok {
			a.st.claim(ip, s)
			as.IPs = sorted(append(as.IPs, ip))
		}
	}
}

func holdsAll(p *Pool, ips []netip.Addr) bool {
	for _, ip := range ips {
		if !p.holds(ip) {
			return false
		}
	}
	return len(ips) > 0
}

func sorted(ips []netip.Addr) []netip.Addr {
	out := slices.Clone(ips)
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// assign finds s a pool and addresses (pass 2 of Allocate).
func (a *allocator) assign(s *Service) (Assignment, error) {
	req, ok := byFamily(s, s.RequestedIPs)
	if !ok {
		return Assignment{}, Reasonf(ErrInvalidRequest, "requested IPs %s: want at most one of each of the Service's families %v", joinAddrs(s.RequestedIPs), s.Families)
	}
	switch {
	case s.RequestedPool != "":
		p := a.byName[s.RequestedPool]
		if p == nil {
			return Assignment{}, Reasonf(ErrNoPool, "requested pool %s does not exist", s.RequestedPool)
		}
		if !p.allows(s) {
			return Assignment{}, Reasonf(ErrNoPool, "requested pool %s does not allow %s (namespace or label limits)", p.Name, s.Key)
		}
		return a.tryPool(s, p, req)
	case len(req) > 0:
		for _, p := range a.pools {
			if p.Mode == ModeL2 && p.allows(s) && holdsAll(p, s.RequestedIPs) {
				return a.tryPool(s, p, req)
			}
		}
		return Assignment{}, a.notInPool(s)
	}
	var cands []*Pool
	for _, p := range a.pools {
		if p.AutoAssign && p.allows(s) {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return Assignment{}, Reasonf(ErrNoPool, "no auto-assign IPAddressPool allows %s", s.Key)
	}
	slices.SortStableFunc(cands, autoOrder)
	var errs []error
	for _, p := range cands {
		as, err := a.tryPool(s, p, req)
		if err == nil {
			return as, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return Assignment{}, errs[0]
	}
	return Assignment{}, &joinedError{prefix: "no eligible pool can serve it: ", errs: errs}
}

// notInPool explains why no pool may give s its requested IPs.
func (a *allocator) notInPool(s *Service) error {
	var owners []string
	for _, ip := range s.RequestedIPs {
		var in []*Pool
		for _, p := range a.pools {
			if p.holds(ip) {
				in = append(in, p)
			}
		}
		if len(in) == 0 {
			return Reasonf(ErrNotInPool, "requested IP %s is in no IPAddressPool", ip)
		}
		usable := slices.IndexFunc(in, func(p *Pool) bool { return p.Mode == ModeL2 && p.allows(s) })
		if usable < 0 {
			return Reasonf(ErrNotInPool, "requested IP %s is in pool %s, which does not allow %s", ip, in[0].Name, s.Key)
		}
		owners = append(owners, fmt.Sprintf("%s in pool %s", ip, in[usable].Name))
	}
	return Reasonf(ErrNotInPool, "requested IPs must come from one pool, but %s", strings.Join(owners, ", "))
}

// tryPool gives s addresses from p (its requested ones where given), or the
// reason it cannot. It changes the state only on success.
func (a *allocator) tryPool(s *Service, p *Pool, req map[ipfamily.Family]netip.Addr) (Assignment, error) {
	if p.Mode == ModeNodeIP {
		if len(req) > 0 {
			return Assignment{}, Reasonf(ErrNotInPool, "requested IP %s: pool %s is in node-ip mode and has no addresses", joinAddrs(s.RequestedIPs), p.Name)
		}
		if err := a.st.nodeClash(s); err != nil {
			return Assignment{}, fmt.Errorf("pool %s: %w", p.Name, err)
		}
		a.st.claimNode(s)
		return Assignment{Pool: p.Name, Mode: ModeNodeIP}, nil
	}
	var picks []netip.Addr
	for i, f := range s.Families {
		if ip, ok := req[f]; ok {
			if !p.holds(ip) {
				return Assignment{}, Reasonf(ErrNotInPool, "requested IP %s is not in pool %s", ip, p.Name)
			}
			if ex, reserved := p.excluded(ip); reserved {
				return Assignment{}, Reasonf(ErrReservedIP, "requested IP %s is %s: pool %s does not hand it out", ip, ex.What, p.Name)
			}
			if err := a.st.canShare(ip, s); err != nil {
				return Assignment{}, err
			}
			picks = append(picks, ip)
			continue
		}
		v4 := f == ipfamily.IPv4
		if !p.hasFamily(v4) {
			if required(s, i) {
				return Assignment{}, Reasonf(ErrNoPool, "pool %s has no %s range", p.Name, f)
			}
			continue
		}
		ip, ok := a.st.free(p, v4, s)
		if !ok {
			if required(s, i) {
				return Assignment{}, Reasonf(ErrPoolExhausted, "pool %s has no free %s address", p.Name, f)
			}
			continue
		}
		picks = append(picks, ip)
	}
	for _, ip := range picks {
		a.st.claim(ip, s)
	}
	return Assignment{Pool: p.Name, Mode: ModeL2, IPs: sorted(picks)}, nil
}

func joinAddrs(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ",")
}
