package zone

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// The answer tests' cluster: every kind of Service and endpoint the spec and
// CoreDNS distinguish. Pod IPs 192.168.N.x sit on node N (docs/design.md, IP plan).
var (
	longNS   = strings.Repeat("n", 63)
	longSvc  = strings.Repeat("s", 63)
	longHost = strings.Repeat("h", 63)
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func clusterIP(ns, name string, ips []string, ports ...model.ServicePort) *model.Service {
	return &model.Service{Namespace: ns, Name: name, Type: model.ServiceTypeClusterIP, ClusterIPs: addrs(ips...), Ports: ports}
}

func headless(ns, name string, ports ...model.ServicePort) *model.Service {
	return &model.Service{Namespace: ns, Name: name, Type: model.ServiceTypeClusterIP, Headless: true, Ports: ports}
}

func externalName(ns, name, ext string) *model.Service {
	return &model.Service{Namespace: ns, Name: name, Type: model.ServiceTypeExternalName, ExternalName: ext}
}

func sp(name string, proto model.Protocol, port int32) model.ServicePort {
	return model.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: port}
}

func ep(ip, hostname string, ready bool) model.Endpoint {
	return model.Endpoint{Addresses: addrs(ip), Ready: ready, Serving: ready, Hostname: hostname}
}

func slice(ns, name, svc string, fam ipfamily.Family, ports []model.EndpointPort, eps ...model.Endpoint) *model.EndpointSlice {
	return &model.EndpointSlice{Namespace: ns, Name: name, Service: svc, AddressType: fam, Ports: ports, Endpoints: eps}
}

func epp(name string, proto model.Protocol, port int32) model.EndpointPort {
	return model.EndpointPort{Name: name, Protocol: proto, Port: port}
}

// fixture returns the snapshot of the answer tests, at revision 8 (the SOA serial).
func fixture(t testing.TB) *model.Snapshot {
	t.Helper()
	tcp, udp := model.ProtocolTCP, model.ProtocolUDP
	etcdPorts := []model.EndpointPort{epp("peer", tcp, 2380), epp("client", tcp, 2379)}
	webPorts := []model.EndpointPort{epp("http", tcp, 8080), epp("https", tcp, 8443)}
	services := []*model.Service{
		clusterIP("kube-system", "kube-dns", []string{"10.96.0.10"}, sp("dns", udp, 53), sp("dns-tcp", tcp, 53), sp("metrics", tcp, 9153)),
		clusterIP("default", "kubernetes", []string{"10.96.0.1"}, sp("https", tcp, 443)),
		clusterIP("default", "web", []string{"10.96.0.20"}, sp("http", tcp, 80), sp("https", tcp, 443)),
		clusterIP("default", "plain", []string{"10.96.0.21"}, sp("", tcp, 8080)),
		clusterIP("default", "dual", []string{"10.96.0.22", "fd00:96::22"}, sp("dns", udp, 53), sp("dns-tcp", tcp, 53)),
		clusterIP("default", "pending", nil, sp("http", tcp, 80)),
		headless("default", "etcd", sp("peer", tcp, 2380), sp("client", tcp, 2379)),
		headless("default", "empty"),
		headless("default", "unready", sp("http", tcp, 80)),
		func() *model.Service {
			s := headless("default", "pnra", sp("http", tcp, 80))
			s.PublishNotReadyAddresses = true
			return s
		}(),
		func() *model.Service {
			s := headless("default", "tolerate", sp("http", tcp, 80))
			s.Annotations = map[string]string{tolerateUnreadyAnnotation: "true"}
			return s
		}(),
		headless("default", "noports"),
		externalName("default", "ext", "www.example.com"),
		externalName("default", "ext-in", "web.default.svc.cluster.local"),
		externalName("default", "ext-gone", "gone.default.svc.cluster.local"),
		externalName("default", "ext-ip", "1.2.3.4"),
		externalName("default", "ext-loop", "ext-loop.default.svc.cluster.local."),
		clusterIP("v6only", "web6", []string{"fd00:96::30"}, sp("http", tcp, 80)),
		headless(longNS, longSvc, sp("http", tcp, 80)),
	}
	slices := []*model.EndpointSlice{
		slice("kube-system", "kube-dns-1", "kube-dns", ipfamily.IPv4,
			[]model.EndpointPort{epp("dns", udp, 53), epp("dns-tcp", tcp, 53), epp("metrics", tcp, 9153)},
			ep("192.168.1.53", "", true)),
		slice("default", "web-1", "web", ipfamily.IPv4, webPorts,
			ep("192.168.1.10", "", true), ep("192.168.2.10", "", true), ep("192.168.3.10", "", false)),
		// etcd: two IPv4 slices (one endpoint listed in both while it moves) and one IPv6.
		slice("default", "etcd-a", "etcd", ipfamily.IPv4, etcdPorts,
			ep("192.168.1.20", "etcd-0", true), ep("192.168.2.20", "etcd-1", true), ep("192.168.3.20", "etcd-2", false)),
		slice("default", "etcd-b", "etcd", ipfamily.IPv4, etcdPorts,
			ep("192.168.1.21", "", true), ep("192.168.2.20", "etcd-1", true)),
		slice("default", "etcd-v6", "etcd", ipfamily.IPv6, etcdPorts,
			ep("fd00:192:168:1::20", "etcd-0", true)),
		slice("default", "unready-1", "unready", ipfamily.IPv4, []model.EndpointPort{epp("http", tcp, 80)},
			ep("192.168.1.30", "", false)),
		slice("default", "pnra-1", "pnra", ipfamily.IPv4, []model.EndpointPort{epp("http", tcp, 80)},
			ep("192.168.1.31", "", false)),
		slice("default", "tolerate-1", "tolerate", ipfamily.IPv4, []model.EndpointPort{epp("http", tcp, 80)},
			ep("192.168.1.32", "", false)),
		slice("default", "noports-1", "noports", ipfamily.IPv4, nil,
			ep("192.168.1.40", "", true)),
		slice(longNS, "long-1", longSvc, ipfamily.IPv4, []model.EndpointPort{epp("http", tcp, 80)},
			ep("192.168.1.50", longHost, true)),
		// A slice whose Service does not exist: never answered.
		slice("default", "orphan-1", "orphan", ipfamily.IPv4, nil, ep("192.168.1.60", "", true)),
	}
	store := model.NewStore()
	store.Update(func(tx *model.Txn) {
		tx.Replace(services, slices, nil, nil)
		tx.SetSynced(true)
	})
	// More revisions, so the serial (the revision) is 8 and visibly not 1.
	for i := range 6 {
		store.Update(func(tx *model.Txn) {
			tx.SetService(clusterIP("scratch", "bump", []string{"10.96.9.9"}, sp("p", tcp, int32(1000+i))))
		})
	}
	store.Update(func(tx *model.Txn) { tx.DeleteService(model.ServiceKey{Namespace: "scratch", Name: "bump"}) })
	snap := store.Snapshot()
	if snap.Revision != 8 {
		t.Fatalf("fixture revision = %d, want 8", snap.Revision)
	}
	return snap
}

// question returns a query for "NAME TYPE" (e.g. "web.default.svc.cluster.local. A").
func question(t testing.TB, q string) *dns.Msg {
	t.Helper()
	i := strings.LastIndexByte(q, ' ')
	if i < 0 {
		t.Fatalf("question %q: want NAME TYPE", q)
	}
	qtype, ok := dns.StringToType[q[i+1:]]
	if !ok {
		t.Fatalf("question %q: unknown type", q)
	}
	m := new(dns.Msg)
	m.Id = 4242
	m.RecursionDesired = true
	m.Question = []dns.Question{{Name: q[:i], Qtype: qtype, Qclass: dns.ClassINET}}
	return m
}
