package iptables

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// manyServices builds a table of n ClusterIP Services of 2 endpoints each,
// every tenth also a NodePort; extra is added to the endpoints of
// default/svc-0 (0 or 1), to make a one-port change.
func manyServices(tb testing.TB, n, extra int) *servicetable.Table {
	st := model.NewStore()
	st.Update(func(tx *model.Txn) {
		for i := range n {
			name := fmt.Sprintf("svc-%d", i)
			s := &model.Service{
				Namespace: "default", Name: name, Type: model.ServiceTypeClusterIP,
				ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})},
				IPFamilies: []ipfamily.Family{ipfamily.IPv4}, InternalTrafficPolicy: model.TrafficPolicyCluster,
				Ports: []model.ServicePort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80, TargetPort: 8080}},
			}
			if i%10 == 0 {
				s.Type, s.ExternalTrafficPolicy = model.ServiceTypeNodePort, model.TrafficPolicyCluster
				s.Ports[0].NodePort = int32(30000 + i/10)
			}
			tx.SetService(s)
			var eps []model.Endpoint
			for j := range 2 + extra*btoi(i == 0) {
				a := netip.AddrFrom4([4]byte{192, 168, byte(j*64 + i>>8&63), byte(i)})
				eps = append(eps, model.Endpoint{Addresses: []netip.Addr{a}, NodeName: "node2", Ready: true, Serving: true})
			}
			tx.SetEndpointSlice(&model.EndpointSlice{Namespace: "default", Name: name, Service: name, AddressType: ipfamily.IPv4,
				Ports: []model.EndpointPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}}, Endpoints: eps})
		}
		tx.SetSynced(true)
	})
	return servicetable.Build(st.Snapshot(), testNode())
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkRender measures Render and the full restore text at n Service
// ports.
//
//	go test -run '^$' -bench Render ./internal/dataplane/iptables
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1000, 10000, 30000} {
		b.Run(fmt.Sprintf("ports=%d", n), func(b *testing.B) {
			tbl := manyServices(b, n, 0)
			b.ResetTimer()
			var size int
			for range b.N {
				size = len(Render(tbl, ipfamily.IPv4).Full())
			}
			b.ReportMetric(float64(size)/1e6, "MB-restore")
		})
	}
}

// BenchmarkKernelRestore measures iptables-restore in a throwaway namespace
// at n Service ports, with iptables-nft (this host's default) and
// iptables-legacy, both with --noflush as a backend must run them (the nat
// and filter tables hold other programs' rules): the full restore into
// empty tables, a second full restore over them, and a partial restore of
// one port's change (an endpoint added), in seconds each.
//
// iptables-nft 1.8.9's --noflush restore grows about with the square of the
// chains: 0.32 s at 1000 ports, 102 s at 10000 (31k chains, 80k rules,
// 12 MB), where iptables-legacy takes 0.76 s and iptables-nft without
// --noflush 1.7 s.
//
//	go test -run '^$' -bench KernelRestore -benchtime 1x ./internal/dataplane/iptables
func BenchmarkKernelRestore(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		base, changed := manyServices(b, n, 0), manyServices(b, n, 1)
		old, cur := Render(base, ipfamily.IPv4), Render(changed, ipfamily.IPv4)
		partial := cur.Partial(map[string]bool{"default/svc-0:http/tcp": true}, cur.Stale(old))
		for _, tool := range []string{"iptables-nft-restore", "iptables-legacy-restore"} {
			b.Run(fmt.Sprintf("ports=%d/%s", n, tool), func(b *testing.B) {
				var full, again, part time.Duration
				for range b.N {
					ns := netnstest.New(b, "iptbench")
					timed := func(input string) time.Duration {
						cmd := ns.Command(tool, "--noflush")
						cmd.Stdin = strings.NewReader(input)
						start := time.Now()
						if out, err := cmd.CombinedOutput(); err != nil {
							b.Fatalf("%s: %v\n%s", tool, err, out)
						}
						return time.Since(start)
					}
					full += timed(old.Full())
					again += timed(old.Full())
					part += timed(partial)
				}
				b.ReportMetric(full.Seconds()/float64(b.N), "s-full")
				b.ReportMetric(again.Seconds()/float64(b.N), "s-full-again")
				b.ReportMetric(part.Seconds()/float64(b.N), "s-partial")
				b.ReportMetric(float64(len(partial))/1e3, "kB-partial")
			})
		}
	}
}
