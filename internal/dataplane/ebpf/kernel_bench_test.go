package ebpf

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// benchPorts returns n ClusterIP ports (10.96.0.0/16 upwards, port 80), two
// endpoints each.
func benchPorts(n int) []*servicetable.ServicePort {
	out := make([]*servicetable.ServicePort, n)
	for i := range out {
		out[i] = benchPort(i, 0)
	}
	return out
}

// benchPort is port i of benchPorts, its endpoints shifted by gen.
func benchPort(i, gen int) *servicetable.ServicePort {
	vip := netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)})
	ep1 := fmt.Sprintf("192.168.%d.%d:8080", (i+gen)%250, 2+i%250)
	ep2 := fmt.Sprintf("192.168.%d.%d:8080", (i+gen+1)%250, 2+i%250)
	return clusterIPPort(fmt.Sprintf("bench/svc-%05d:80/tcp", i), netip.AddrPortFrom(vip, 80).String(), ep(ep1, false), ep(ep2, false))
}

// BenchmarkKernelPlaneSync measures the eBPF plane's syncs at N Service
// ports in a throwaway namespace and child cgroup: the full sync (nftables
// rules and socket load balancer), then per iteration one port's endpoints
// changed (a partial sync), the tables coming from a servicetable.Assembler
// as the proxy's do. Metrics: the full sync, and p50/p99 of the
// change's whole Sync and of its socket load balancer part alone (the map
// updates; the reap after them runs in the background).
//
//	SVCNET_REQUIRE_ROOT=1 go test -run '^$' -bench KernelPlaneSync -benchtime 200x ./internal/dataplane/ebpf
func BenchmarkKernelPlaneSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ports=%d", n), func(b *testing.B) { benchPlaneSync(b, n) })
	}
}

// timedLB times the socket load balancer's map changes (the Sync's own
// goroutine; the reap after them runs in the background).
type timedLB struct {
	SocketLB
	spent time.Duration
}

func (l *timedLB) SetServicePolicy(fe netip.AddrPort, p model.Protocol, bes []netip.AddrPort, pol socklb.Policy) error {
	start := time.Now()
	defer func() { l.spent += time.Since(start) }()
	return l.SocketLB.SetServicePolicy(fe, p, bes, pol)
}

func (l *timedLB) DeleteService(fe netip.AddrPort, p model.Protocol) error {
	start := time.Now()
	defer func() { l.spent += time.Since(start) }()
	return l.SocketLB.DeleteService(fe, p)
}

func benchPlaneSync(b *testing.B, n int) {
	ctx := context.Background()
	ns := netnstest.New(b, "ebpfbench")
	cg := cgrouptest.New(b)
	conn, err := netlink.New(ns)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	tl := &timedLB{}
	p := New(nftables.New(conn, ipfamily.IPv4), func() (SocketLB, error) {
		lb, err := socklb.Open(cg)
		tl.SocketLB = lb
		return tl, err
	}, nil, ipfamily.IPv4)
	b.Cleanup(func() { _ = p.Close() })
	asm := servicetable.NewAssembler(servicetable.NodeConfig{NodeName: "node1"})
	key := func(i int) model.ServiceKey {
		return model.ServiceKey{Namespace: "bench", Name: fmt.Sprintf("svc-%05d", i)}
	}
	for i, sp := range benchPorts(n) {
		asm.Set(key(i), []*servicetable.ServicePort{sp})
	}
	start := time.Now()
	if _, err := p.Sync(ctx, asm.Table(), false); err != nil {
		b.Fatal(err)
	}
	fullSync, fullMaps := time.Since(start), tl.spent
	var whole, maps []time.Duration
	b.ResetTimer()
	for i := range b.N {
		asm.Set(key(i%n), []*servicetable.ServicePort{benchPort(i%n, i+1)})
		next := asm.Table()
		tl.spent = 0
		start := time.Now()
		if _, err := p.Sync(ctx, next, false); err != nil {
			b.Fatal(err)
		}
		whole = append(whole, time.Since(start))
		maps = append(maps, tl.spent)
	}
	b.StopTimer()
	q := func(ds []time.Duration, f float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(f*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(fullSync.Milliseconds()), "full-ms")
	b.ReportMetric(float64(fullMaps.Milliseconds()), "full-maps-ms")
	b.ReportMetric(q(whole, 0.5), "change-p50-ms")
	b.ReportMetric(q(whole, 0.99), "change-p99-ms")
	b.ReportMetric(q(maps, 0.5), "maps-p50-ms")
	b.ReportMetric(q(maps, 0.99), "maps-p99-ms")
}
