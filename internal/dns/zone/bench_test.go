package zone

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// bigSnapshot returns n Services in n/100 namespaces: of every ten, seven
// ClusterIP Services with two named ports and a slice of three endpoints, two
// headless ones with three hostnamed endpoints, one ExternalName.
func bigSnapshot(b *testing.B, n int) *model.Snapshot {
	b.Helper()
	tcp := model.ProtocolTCP
	var services []*model.Service
	var slices []*model.EndpointSlice
	for i := range n {
		ns, name := fmt.Sprintf("ns-%d", i%max(n/100, 1)), fmt.Sprintf("svc-%d", i)
		// 30k pod IPs do not fit in the lab's 192.168.0.0/16: take them from 10.128.0.0/9.
		podIP := func(j int) string { return fmt.Sprintf("10.%d.%d.%d", 128+j, i>>8, i&0xff) }
		ports := []model.EndpointPort{epp("http", tcp, 8080), epp("metrics", tcp, 9090)}
		switch i % 10 {
		case 9:
			services = append(services, externalName(ns, name, "www.example.com"))
			continue
		case 7, 8:
			services = append(services, headless(ns, name, sp("http", tcp, 80), sp("metrics", tcp, 9090)))
			slices = append(slices, slice(ns, name+"-1", name, ipfamily.IPv4, ports,
				ep(podIP(1), name+"-0", true), ep(podIP(2), name+"-1", true), ep(podIP(3), name+"-2", true)))
		default:
			ip := netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)}).String()
			services = append(services, clusterIP(ns, name, []string{ip}, sp("http", tcp, 80), sp("metrics", tcp, 9090)))
			slices = append(slices, slice(ns, name+"-1", name, ipfamily.IPv4, ports,
				ep(podIP(1), "", true), ep(podIP(2), "", true), ep(podIP(3), "", false)))
		}
	}
	store := model.NewStore()
	store.Update(func(tx *model.Txn) { tx.Replace(services, slices, nil, nil) })
	return store.Snapshot()
}

// BenchmarkBuild indexes 10k Services (target: well under 50 ms an op).
func BenchmarkBuild(b *testing.B) {
	snap := bigSnapshot(b, 10000)
	b.ReportAllocs()
	for b.Loop() {
		Build(Config{TTL: 5}, snap)
	}
}

// BenchmarkAnswer answers one question of each kind against 10k Services.
func BenchmarkAnswer(b *testing.B) {
	v := Build(Config{TTL: 5}, bigSnapshot(b, 10000))
	for _, q := range []string{
		"svc-1234.ns-34.svc.cluster.local. A",
		"svc-1234.ns-34.svc.cluster.local. AAAA",
		"_http._tcp.svc-1234.ns-34.svc.cluster.local. SRV",
		"svc-1237.ns-37.svc.cluster.local. A",
		"_http._tcp.svc-1237.ns-37.svc.cluster.local. SRV",
		"svc-1239.ns-39.svc.cluster.local. A",
		"nosuch.ns-34.svc.cluster.local. A",
		"10-1-2-3.ns-1.pod.cluster.local. A",
		"210.4.96.10.in-addr.arpa. PTR",
		"example.com. A",
	} {
		req := question(b, q)
		if _, err := req.Pack(); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%s_%s", dns.TypeToString[req.Question[0].Qtype], req.Question[0].Name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v.Answer(req)
			}
		})
	}
}
