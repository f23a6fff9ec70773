package zone

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/model"
)

// Update returns the View of snap, a snapshot that differs from the one v
// was made of in the Services changed alone (a Service, or its slices, by
// key): what Build of snap with v's Config returns, made from v without
// indexing again the Services that did not change. v is not modified. Its
// cost is copying v's maps and one pass over the Services (and over their
// endpoint addresses when a changed one held any): at 10,000 Services about
// a quarter of Build's, most of it the copies (BenchmarkUpdate).
func (v *View) Update(snap *model.Snapshot, changed []model.ServiceKey) *View {
	n := &View{zone: v.zone, zoneLabels: v.zoneLabels, ttl: v.ttl, serial: uint32(snap.Revision),
		services: maps.Clone(v.services), namespaces: maps.Clone(v.namespaces),
		ptrService: v.ptrService.clone(), ptrEndpoint: v.ptrEndpoint.clone(),
		nsTarget: "ns.dns." + v.zone}
	ips, addrs, namespaces := map[netip.Addr]bool{}, map[netip.Addr]bool{}, map[string]bool{}
	touch := func(s *service) {
		for _, ip := range s.ips {
			ips[ip] = true
		}
		for i := range s.slices {
			for _, a := range s.slices[i].addrs {
				if a.target != "" {
					addrs[a.addr] = true
				}
			}
		}
	}
	for _, k := range changed {
		key := svcKey{ns: strings.ToLower(k.Namespace), name: strings.ToLower(k.Name)}
		if old := n.services[key]; old != nil {
			touch(old)
			delete(n.services, key)
			namespaces[key.ns] = true
		}
		if st := snap.Service(k); st != nil {
			if s := newService(st, n.zone); s != nil {
				n.services[key] = s
				n.namespaces[key.ns] = struct{}{}
				touch(s)
			}
		}
	}
	n.reindex(ips, addrs, namespaces)
	if s := n.services[nameserverService]; s != nil && s.kind == kindClusterIP && len(s.ips) > 0 {
		n.nsTarget, n.nsAddrs = s.fqdn, s.ips
	}
	return n
}

// reindex makes the PTR records of ips (ClusterIPs) and addrs (endpoint
// addresses), and the namespaces, what Build would make of v's Services:
// a ClusterIP names the first Service by key that has it; an endpoint
// address every target of the Services that have it, in the order of
// their keys then of their slices.
func (v *View) reindex(ips, addrs map[netip.Addr]bool, namespaces map[string]bool) {
	for ns := range namespaces {
		delete(v.namespaces, ns)
	}
	first := map[netip.Addr]svcKey{}
	type hit struct {
		key    svcKey
		target string
	}
	hits := map[netip.Addr][]hit{}
	for k, s := range v.services {
		if namespaces[k.ns] {
			v.namespaces[k.ns] = struct{}{}
		}
		for _, ip := range s.ips {
			if f, ok := first[ip]; ips[ip] && (!ok || lessKey(k, f)) {
				first[ip] = k
			}
		}
		if len(addrs) == 0 {
			continue
		}
		for i := range s.slices {
			for _, a := range s.slices[i].addrs {
				if a.target != "" && addrs[a.addr] {
					hits[a.addr] = append(hits[a.addr], hit{k, a.target})
				}
			}
		}
	}
	for ip := range ips {
		if k, ok := first[ip]; ok {
			v.ptrService.set(ip, v.services[k].fqdn)
		} else {
			v.ptrService.del(ip)
		}
	}
	for a := range addrs {
		v.ptrEndpoint.del(a)
		hs := hits[a]
		// Stable: one Service's targets keep their order.
		slices.SortStableFunc(hs, func(x, y hit) int { return compareKey(x.key, y.key) })
		for _, h := range hs {
			v.addPTR(a, h.target)
		}
	}
}

// lessKey and compareKey order keys as Build meets the Services: by the
// model's keys, which are these in lower case for every name the API
// server admits.
func lessKey(a, b svcKey) bool { return compareKey(a, b) < 0 }

func compareKey(a, b svcKey) int {
	return model.CompareServiceKeys(model.ServiceKey{Namespace: a.ns, Name: a.name}, model.ServiceKey{Namespace: b.ns, Name: b.name})
}
