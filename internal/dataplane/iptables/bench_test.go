package iptables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
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

// withService returns t with the ports of Service svc-<i> of manyServices
// added, in ID order as servicetable.Table keeps them; t's other entries
// stay the same pointers.
func withService(tb testing.TB, t *servicetable.Table, i int) servicetable.Table {
	out := *t
	out.Ports = slices.Clone(t.Ports)
	for _, sp := range manyServices(tb, i+1, 0).Ports {
		if strings.HasPrefix(sp.ID, fmt.Sprintf("default/svc-%d:", i)) {
			at, _ := slices.BinarySearchFunc(out.Ports, sp.ID, func(o *servicetable.ServicePort, id string) int { return strings.Compare(o.ID, id) })
			out.Ports = slices.Insert(out.Ports, at, sp)
		}
	}
	if len(out.Ports) != len(t.Ports)+1 {
		tb.Fatalf("svc-%d: no port added", i)
	}
	return out
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

// BenchmarkKernelSync measures the backend in a throwaway namespace at n
// Service ports, with iptables-nft (this host's default) and
// iptables-legacy: the full sync into empty tables (s-full), a restarted
// backend's full sync adopting them (s-adopt, which must write nothing),
// and a partial sync of one port's change (an endpoint added), in seconds.
//
//	SVCNET_REQUIRE_ROOT=1 go test -run '^$' -bench KernelSync -benchtime 1x ./internal/dataplane/iptables
func BenchmarkKernelSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		base := manyServices(b, n, 0)
		// As the proxier's assembler builds it: the unchanged entries are
		// the same pointers (the backend compares them).
		changed := *base
		changed.Ports = slices.Clone(base.Ports)
		for _, sp := range manyServices(b, 1, 1).Ports {
			i := slices.IndexFunc(changed.Ports, func(o *servicetable.ServicePort) bool { return o.ID == sp.ID })
			changed.Ports[i] = sp
		}
		// One Service more: the partial sync adds its chains and one
		// rule in KUBE-SERVICES (and, deleted again, removes them).
		added := withService(b, &changed, n)
		for _, v := range []ipt.Variant{ipt.NFT, ipt.Legacy} {
			b.Run(fmt.Sprintf("ports=%d/%s", n, v), func(b *testing.B) {
				var full, adopt, part, add, del time.Duration
				for range b.N {
					ns := netnstest.New(b, "iptbench")
					run := &ipt.Exec{Variant: v, Command: ns.CommandContext}
					timed := func(be *Backend, t *servicetable.Table, fullSync bool, wantOps bool) time.Duration {
						st, err := be.Sync(context.Background(), t, fullSync)
						if err != nil {
							b.Fatal(err)
						}
						if (st.TotalOps() > 0) != wantOps {
							b.Fatalf("sync wrote %d ops", st.TotalOps())
						}
						return st.Duration
					}
					be := New(run, ipfamily.IPv4)
					full += timed(be, base, true, true)
					adopt += timed(New(run, ipfamily.IPv4), base, true, false)
					part += timed(be, &changed, false, true)
					add += timed(be, &added, false, true)
					del += timed(be, &changed, false, true)
				}
				b.ReportMetric(full.Seconds()/float64(b.N), "s-full")
				b.ReportMetric(adopt.Seconds()/float64(b.N), "s-adopt")
				b.ReportMetric(part.Seconds()/float64(b.N), "s-partial")
				b.ReportMetric(add.Seconds()/float64(b.N), "s-add-service")
				b.ReportMetric(del.Seconds()/float64(b.N), "s-del-service")
			})
		}
	}
}

// BenchmarkKernelRestoreOrder restores, with iptables-nft-restore, the
// per-port chains of n Service ports in restores of 200 ports, then the
// shared chains as rendered (KUBE-SERVICES by jump target, descending) and
// again with KUBE-SERVICES in ascending order: the cost of the order (see
// byHashDescending), in seconds.
//
//	SVCNET_REQUIRE_ROOT=1 go test -run '^$' -bench KernelRestoreOrder -benchtime 1x ./internal/dataplane/iptables
func BenchmarkKernelRestoreOrder(b *testing.B) {
	n := 10000
	rs := Render(manyServices(b, n, 0), ipfamily.IPv4)
	for range b.N {
		ns := netnstest.New(b, "iptorder")
		timed := func(input string) time.Duration {
			cmd := ns.Command("iptables-nft-restore", "--noflush")
			cmd.Stdin = strings.NewReader(input)
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("iptables-nft-restore: %v\n%s", err, out)
			}
			return time.Since(start)
		}
		p := planFull(nil, rs, nil)
		var batches time.Duration
		for _, c := range p.batches(DefaultBatchPorts) {
			batches += timed(c.input)
		}
		shared := func() string {
			var sb strings.Builder
			writeTable(&sb, TableFilter, rs.fixedChains(TableFilter), nil)
			writeTable(&sb, TableNAT, rs.fixedChains(TableNAT), nil)
			return sb.String()
		}
		desc := timed(shared())
		fixed := rs.fixedChains(TableNAT)
		svc := fixed[0].Rules
		head := slices.Clone(svc[:len(svc)-len(rs.cfg.NodePortAddrs)])
		slices.Reverse(head)
		asc := slices.Concat(head, svc[len(head):])
		var sb strings.Builder
		writeTable(&sb, TableNAT, []*Chain{{Name: ChainServices, Rules: asc}}, nil)
		b.ReportMetric(batches.Seconds(), "s-batches")
		b.ReportMetric(desc.Seconds(), "s-shared-desc")
		b.ReportMetric(timed(sb.String()).Seconds(), "s-services-asc")
	}
}
