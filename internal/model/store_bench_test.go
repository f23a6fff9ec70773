package model

import (
	"fmt"
	"net/netip"
	"strconv"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// population returns n ClusterIP Services with one EndpointSlice of two
// endpoints each, every object new.
func population(n int) ([]*Service, []*EndpointSlice) {
	var svcs []*Service
	var sls []*EndpointSlice
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		svcs = append(svcs, &Service{Namespace: "bench", Name: name, UID: "u" + name, Type: ServiceTypeClusterIP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i / 250), byte(i%250 + 2)})}, IPFamilies: []ipfamily.Family{ipfamily.IPv4},
			Ports: []ServicePort{{Name: "http", Protocol: ProtocolTCP, Port: 80, TargetPort: 8080}}, InternalTrafficPolicy: TrafficPolicyCluster,
			Labels: map[string]string{"app": "bench"}})
		sls = append(sls, &EndpointSlice{Namespace: "bench", Name: name + "-x", Service: name, AddressType: ipfamily.IPv4,
			Ports: []EndpointPort{{Name: "http", Protocol: ProtocolTCP, Port: 8080}},
			Endpoints: []Endpoint{{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{192, 168, byte(i / 127), byte(2*(i%127) + 1)})}, Ready: true, Serving: true},
				{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{192, 168, byte(i / 127), byte(2*(i%127) + 2)})}, Ready: true, Serving: true}}})
	}
	return svcs, sls
}

// BenchmarkReplaceAgain10k: a store holding 10,000 Services and their
// slices is given them again, as new objects, with one more (what a reload
// of manifests does).
func BenchmarkReplaceAgain10k(b *testing.B) {
	s := NewStore()
	svcs, sls := population(10000)
	s.Update(func(tx *Txn) { tx.Replace(svcs, sls, nil, nil) })
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		svcs, sls := population(10001 + i)
		b.StartTimer()
		s.Update(func(tx *Txn) { tx.Replace(svcs, sls, nil, nil) })
	}
}

// BenchmarkStoreUpdate10k measures one Service change in a store of 10k
// Services with a slice each, and the garbage it leaves (allocs/op, B/op).
func BenchmarkStoreUpdate10k(b *testing.B) {
	s := NewStore()
	s.Update(func(tx *Txn) {
		for i := range 10000 {
			name := "svc-" + strconv.Itoa(i)
			tx.SetService(&Service{Namespace: "bench", Name: name})
			tx.SetEndpointSlice(&EndpointSlice{Namespace: "bench", Name: name + "-1", Service: name, AddressType: ipfamily.IPv4})
		}
	})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		name := "svc-" + strconv.Itoa(i%10000)
		s.Update(func(tx *Txn) {
			tx.SetService(&Service{Namespace: "bench", Name: name, Type: ServiceType(strconv.Itoa(i))})
		})
	}
}
