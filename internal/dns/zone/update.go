package zone

import (
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/model"
)

// Update returns the View of snap, a snapshot that differs from the one v
// was made of in the Services changed alone (a Service, or its slices, by
// key): what Build of snap with v's Config returns, made from v at the cost
// of the changed Services and the addresses they had or have. v is not
// modified: the two share the storage the change did not touch
// (BenchmarkUpdate).
func (v *View) Update(snap *model.Snapshot, changed []model.ServiceKey) *View {
	n := &View{zone: v.zone, zoneLabels: v.zoneLabels, ttl: v.ttl, serial: uint32(snap.Revision),
		services: v.services.Clone(), namespaces: v.namespaces.Clone(),
		ptrService: v.ptrService.clone(), ptrEndpoint: v.ptrEndpoint.clone(),
		byClusterIP: v.byClusterIP.clone(), byEndpoint: v.byEndpoint.clone()}
	ips, addrs := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for _, k := range changed {
		key := keyOf(k)
		if old := n.services.Get(key); old != nil {
			n.unindex(key, old, ips, addrs)
		}
		if st := snap.Service(k); st != nil {
			if s := newService(st, n.zone); s != nil {
				n.index(key, s, ips, addrs)
			}
		}
	}
	for ip := range ips {
		if h, ok := n.byClusterIP.get(ip); ok {
			n.ptrService.set(ip, n.services.Get(h.first).fqdn)
		} else {
			n.ptrService.del(ip)
		}
	}
	for a := range addrs {
		n.ptrEndpoint.del(a)
		h, _ := n.byEndpoint.get(a)
		for _, k := range h.keys() {
			s := n.services.Get(k)
			for i := range s.slices {
				for _, e := range s.slices[i].addrs {
					if e.addr == a && e.target != "" {
						n.addPTR(a, e.target)
					}
				}
			}
		}
	}
	n.setNameserver()
	return n
}

// index adds s, the Service k, to v's Services, namespaces and address
// indexes, noting its addresses in ips (ClusterIPs) and addrs (endpoint
// addresses with a hostname) when they are not nil. It makes no PTR record.
func (v *View) index(k svcKey, s *service, ips, addrs map[netip.Addr]bool) {
	v.services.Set(k, s)
	v.namespaces.Set(k.ns, v.namespaces.Get(k.ns)+1)
	for _, ip := range s.ips {
		h, _ := v.byClusterIP.get(ip)
		v.byClusterIP.set(ip, h.with(k))
		note(ips, ip)
	}
	for i := range s.slices {
		for _, a := range s.slices[i].addrs {
			if a.target != "" {
				h, _ := v.byEndpoint.get(a.addr)
				v.byEndpoint.set(a.addr, h.with(k))
				note(addrs, a.addr)
			}
		}
	}
}

// unindex removes s, the Service k, from what index added it to, noting
// its addresses in ips and addrs.
func (v *View) unindex(k svcKey, s *service, ips, addrs map[netip.Addr]bool) {
	v.services.Del(k)
	if c := v.namespaces.Get(k.ns); c > 1 {
		v.namespaces.Set(k.ns, c-1)
	} else {
		v.namespaces.Del(k.ns)
	}
	for _, ip := range s.ips {
		h, _ := v.byClusterIP.get(ip)
		setOrDel(v.byClusterIP, ip, h.without(k))
		note(ips, ip)
	}
	for i := range s.slices {
		for _, a := range s.slices[i].addrs {
			if a.target != "" {
				h, _ := v.byEndpoint.get(a.addr)
				setOrDel(v.byEndpoint, a.addr, h.without(k))
				note(addrs, a.addr)
			}
		}
	}
}

func note(m map[netip.Addr]bool, a netip.Addr) {
	if m != nil {
		m[a] = true
	}
}

func setOrDel(m addrMap[holders], a netip.Addr, h holders) {
	if h.first == (svcKey{}) {
		m.del(a)
	} else {
		m.set(a, h)
	}
}

// holders are the keys, sorted, of the Services that have one address: the
// first, then any more. Most addresses have one, held without a slice. The
// zero value holds none (no Service has an empty key). A holders is never
// modified: its methods return new ones, as it may be another View's.
type holders struct {
	first svcKey
	more  []svcKey
}

// keys returns h's keys in a new slice.
func (h holders) keys() []svcKey {
	if h.first == (svcKey{}) {
		return nil
	}
	return append([]svcKey{h.first}, h.more...)
}

// holdersOf returns the holders of the sorted keys ks, which it keeps.
func holdersOf(ks []svcKey) holders {
	if len(ks) == 0 {
		return holders{}
	}
	h := holders{first: ks[0]}
	if len(ks) > 1 {
		h.more = ks[1:]
	}
	return h
}

// with returns h with k.
func (h holders) with(k svcKey) holders {
	if h.first == (svcKey{}) {
		return holders{first: k}
	}
	ks := h.keys()
	i, found := slices.BinarySearchFunc(ks, k, compareKey)
	if found {
		return h
	}
	return holdersOf(slices.Insert(ks, i, k))
}

// without returns h without k.
func (h holders) without(k svcKey) holders {
	ks := h.keys()
	i, found := slices.BinarySearchFunc(ks, k, compareKey)
	if !found {
		return h
	}
	return holdersOf(slices.Delete(ks, i, i+1))
}

// compareKey orders keys as Build meets the Services: by the model's keys,
// which are these in lower case for every name the API server admits.
func compareKey(a, b svcKey) int {
	return model.CompareServiceKeys(model.ServiceKey{Namespace: a.ns, Name: a.name}, model.ServiceKey{Namespace: b.ns, Name: b.name})
}
