package zone

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/cowmap"
	"github.com/svcnet/svcnet/internal/model"
)

// nameserverService is the Service named by the zone's NS record, as CoreDNS does
// when it runs behind it: kube-system/kube-dns, the name every cluster DNS keeps.
var nameserverService = svcKey{ns: "kube-system", name: "kube-dns"}

// maxName is the longest name, in presentation form with the trailing dot, whose
// wire form fits the 255 octets DNS allows (names built here carry no escapes).
const maxName = 254

// View is an immutable index of one snapshot, answering for the cluster zone and
// for the reverse names of the addresses it knows. It is safe for concurrent use.
type View struct {
	zone       string   // canonical, e.g. "cluster.local."
	zoneLabels []string // zone split into labels
	ttl        uint32
	serial     uint32

	// The maps are copy-on-write: a View made by Update shares the storage
	// of the one it was made from.
	services *cowmap.Map[svcKey, *service]
	// namespaces counts the Services of each namespace that has any.
	namespaces *cowmap.Map[string, int]
	// ptrService maps a ClusterIP (unmapped) to the first Service, by
	// namespace/name, that has it; ptrEndpoint maps an endpoint address to every
	// <hostname>.<svc>.<ns>.svc.<zone> it has.
	ptrService  addrMap[string]
	ptrEndpoint addrMap[ptrTargets]
	// byClusterIP and byEndpoint are the keys, sorted, of the Services that
	// have an address as a ClusterIP, or as a published endpoint with a
	// hostname: what Update reads to make an address's PTR records again.
	byClusterIP addrMap[holders]
	byEndpoint  addrMap[holders]

	// nsTarget is the NS record's target; nsAddrs its addresses (the ClusterIPs of
	// kube-system/kube-dns, none without that Service).
	nsTarget string
	nsAddrs  []netip.Addr
}

// Build indexes snap for Config cfg. It never fails: an object that cannot be
// served (a name too long for DNS, an unusable external name) is left out of the
// answers it would have given, and the rest are served. A nil snap gives a View
// of an empty cluster. The View shares nothing mutable with snap.
//
// Cost: linear in Services plus endpoint addresses (BenchmarkBuild); Update
// makes the View of a change from the last one at the cost of the change.
func Build(cfg Config, snap *model.Snapshot) *View {
	var states []*model.ServiceState
	v := &View{zone: cfg.zone(), ttl: cfg.TTL}
	if snap != nil {
		v.serial = uint32(snap.Revision)
		states = snap.Services()
	}
	v.zoneLabels = dns.SplitDomainName(v.zone)
	v.services = cowmap.New[svcKey, *service](len(states))
	v.namespaces = &cowmap.Map[string, int]{}
	v.ptrService, v.byClusterIP = newAddrMap[string](len(states)), newAddrMap[holders](len(states))
	v.ptrEndpoint, v.byEndpoint = newAddrMap[ptrTargets](2*len(states)), newAddrMap[holders](2*len(states))
	for _, st := range states {
		v.add(st)
	}
	v.setNameserver()
	return v
}

// setNameserver points the NS record at kube-system/kube-dns when it is a
// ClusterIP Service with addresses.
func (v *View) setNameserver() {
	v.nsTarget, v.nsAddrs = "ns.dns."+v.zone, nil
	if s := v.services.Get(nameserverService); s != nil && s.kind == kindClusterIP && len(s.ips) > 0 {
		v.nsTarget, v.nsAddrs = s.fqdn, s.ips
	}
}

// Zone returns the zone the View answers for, canonical ("cluster.local.").
func (v *View) Zone() string { return v.zone }

// add indexes one Service; states come sorted by namespace/name, which decides
// which Service a shared ClusterIP's PTR names.
func (v *View) add(st *model.ServiceState) {
	s := newService(st, v.zone)
	if s == nil {
		return
	}
	k := keyOf(st.Service.Key())
	v.index(k, s, nil, nil)
	for _, ip := range s.ips {
		if _, ok := v.ptrService.get(ip); !ok {
			v.ptrService.set(ip, s.fqdn)
		}
	}
	for i := range s.slices {
		for _, a := range s.slices[i].addrs {
			if a.target != "" {
				v.addPTR(a.addr, a.target)
			}
		}
	}
}

// keyOf is the View's key of a Service.
func keyOf(k model.ServiceKey) svcKey {
	return svcKey{ns: strings.ToLower(k.Namespace), name: strings.ToLower(k.Name)}
}

// ptrTargets are the PTR targets of one endpoint address: first, then any more
// (an address in several Services, or with several hostnames).
type ptrTargets struct {
	first string
	more  []string
}

// addPTR adds target to the endpoint address a, once.
func (v *View) addPTR(a netip.Addr, target string) {
	pt, ok := v.ptrEndpoint.get(a)
	switch {
	case !ok:
		v.ptrEndpoint.set(a, ptrTargets{first: target})
	case pt.first == target || slices.Contains(pt.more, target):
	default:
		pt.more = append(pt.more, target)
		v.ptrEndpoint.set(a, pt)
	}
}
