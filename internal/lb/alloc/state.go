package alloc

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// ipUse is who holds one pool address.
type ipUse struct {
	holders []*Service                // in claim order
	ports   map[Port]model.ServiceKey // every holder's ports
}

// familyPort is a (family, protocol, port) on the nodes' own addresses.
type familyPort struct {
	family ipfamily.Family
	port   Port
}

// state is the allocation being built by one Allocate call.
type state struct {
	ips       map[netip.Addr]*ipUse
	nodePorts map[familyPort]model.ServiceKey // node-ip mode Services' ports
}

func newState() *state {
	return &state{ips: map[netip.Addr]*ipUse{}, nodePorts: map[familyPort]model.ServiceKey{}}
}

// canShare returns nil when s may hold ip next to its current holders: every holder
// has the same non-empty sharing key, none uses one of s's ports, and, when s or a
// holder has externalTrafficPolicy Local, both select the same Pods. The error wraps
// ErrIPInUse or ErrPortClash and names the holder.
func (st *state) canShare(ip netip.Addr, s *Service) error {
	use := st.ips[ip]
	if use == nil {
		return nil
	}
	for _, h := range use.holders {
		if reason := sharingRefusal(h, s); reason != "" {
			return Reasonf(ErrIPInUse, "%s is in use by %s, which does not share it: %s", ip, h.Key, reason)
		}
	}
	for _, p := range s.Ports {
		if owner, ok := use.ports[p]; ok {
			return Reasonf(ErrPortClash, "%s %s is in use by %s", ip, p, owner)
		}
	}
	return nil
}

// sharingRefusal says why holder h and s may not share an address, or "".
func sharingRefusal(h, s *Service) string {
	switch {
	case h.SharingKey == "":
		return "it has no sharing key"
	case s.SharingKey == "":
		return "this Service has no sharing key"
	case h.SharingKey != s.SharingKey:
		return fmt.Sprintf("its sharing key %q differs from %q", h.SharingKey, s.SharingKey)
	case (h.TrafficPolicyLocal || s.TrafficPolicyLocal) && !maps.Equal(h.Selector, s.Selector):
		return "externalTrafficPolicy Local needs both to have the same selector"
	}
	return ""
}

// claim records s as a holder of ip.
func (st *state) claim(ip netip.Addr, s *Service) {
	use := st.ips[ip]
	if use == nil {
		use = &ipUse{ports: map[Port]model.ServiceKey{}}
		st.ips[ip] = use
	}
	use.holders = append(use.holders, s)
	for _, p := range s.Ports {
		use.ports[p] = s.Key
	}
}

// nodeClash returns an error wrapping ErrPortClash when a node-ip mode Service
// already uses one of s's ports in one of its families (all such Services share the
// nodes' addresses).
func (st *state) nodeClash(s *Service) error {
	for _, f := range s.Families {
		for _, p := range s.Ports {
			if owner, ok := st.nodePorts[familyPort{f, p}]; ok {
				return Reasonf(ErrPortClash, "%s on the nodes' %s addresses is in use by %s", p, f, owner)
			}
		}
	}
	return nil
}

// claimNode records s's ports on the nodes' addresses.
func (st *state) claimNode(s *Service) {
	for _, f := range s.Families {
		for _, p := range s.Ports {
			st.nodePorts[familyPort{f, p}] = s.Key
		}
	}
}

// free returns the address of family v4 in p that s should get: with a sharing key,
// the lowest address of p already held under that key that s may share; else the
// lowest unused address; never an excluded one. The ranges of p are sorted by First.
// The walk over a range stops at the first usable address and jumps over each
// excluded block whole, so it takes at most len(st.ips)+len(p.Excluded)+1 steps per
// range, however large the range.
func (st *state) free(p *Pool, v4 bool, s *Service) (netip.Addr, bool) {
	if s.SharingKey != "" {
		var shared []netip.Addr
		for ip, use := range st.ips {
			if _, ex := p.excluded(ip); !ex && ip.Is4() == v4 && use.holders[0].SharingKey == s.SharingKey && p.holds(ip) {
				shared = append(shared, ip)
			}
		}
		slices.SortFunc(shared, netip.Addr.Compare)
		for _, ip := range shared {
			if st.canShare(ip, s) == nil {
				return ip, true
			}
		}
	}
	for _, r := range p.Ranges {
		if r.First.Is4() != v4 {
			continue
		}
		for a, n := r.First, 0; n <= len(st.ips)+len(p.Excluded); n++ {
			if ex, ok := p.excluded(a); ok {
				if ex.Range.Last.Compare(r.Last) >= 0 {
					break
				}
				a = ex.Range.Last.Next()
				continue
			}
			if st.ips[a] == nil {
				return a, true
			}
			if a == r.Last {
				break
			}
			a = a.Next()
		}
	}
	return netip.Addr{}, false
}
