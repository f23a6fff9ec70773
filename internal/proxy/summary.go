package proxy

import (
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// summary is what the proxier reports about the service table besides the
// data plane's sync: the entries of each family, those with no local
// endpoint under a Local traffic policy (kube-proxy's
// sync_proxy_rules_no_local_endpoints_total), the entries with a health
// check node port, and the UDP and SCTP entries (whose stale flows
// conntrack cleanup deletes). It follows each table's Delta from the one
// before, so that one change costs O(changed entries), and counts a table
// whole when its Delta does not follow the last table it saw.
type summary struct {
	seq      uint64
	services map[ipfamily.Family]int
	noLocal  map[noLocalKey]int
	health   map[*servicetable.ServicePort]struct{}
	datagram map[*servicetable.ServicePort]struct{}
}

// noLocalKey is a policy ("internal" or "external") and a family.
type noLocalKey struct {
	policy string
	family ipfamily.Family
}

// follow brings s to t.
func (s *summary) follow(t *servicetable.Table) {
	if d := t.DeltaFrom(s.seq); d != nil {
		for _, sp := range d.Removed {
			s.add(sp, -1)
		}
		for _, sp := range d.Added {
			s.add(sp, +1)
		}
	} else {
		*s = summary{
			services: map[ipfamily.Family]int{},
			noLocal:  map[noLocalKey]int{},
			health:   map[*servicetable.ServicePort]struct{}{},
			datagram: map[*servicetable.ServicePort]struct{}{},
		}
		for _, sp := range t.Ports {
			s.add(sp, +1)
		}
	}
	s.seq = t.Seq
}

// add counts sp in (n = +1) or out (n = -1).
func (s *summary) add(sp *servicetable.ServicePort, n int) {
	f := ipfamily.IPv4
	if sp.Family == ipfamily.IPv6 {
		f = ipfamily.IPv6
	}
	s.services[f] += n
	if len(sp.LocalEndpoints) == 0 {
		if sp.InternalPolicyLocal {
			s.noLocal[noLocalKey{"internal", f}] += n
		}
		if sp.ExternalPolicyLocal {
			s.noLocal[noLocalKey{"external", f}] += n
		}
	}
	if sp.HealthCheckNodePort != 0 {
		member(s.health, sp, n > 0)
	}
	if sp.Protocol != model.ProtocolTCP {
		member(s.datagram, sp, n > 0)
	}
}

func member(set map[*servicetable.ServicePort]struct{}, sp *servicetable.ServicePort, in bool) {
	if in {
		set[sp] = struct{}{}
	} else {
		delete(set, sp)
	}
}
