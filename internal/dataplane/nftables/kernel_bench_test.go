package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/proxy/servicetable"
)

// BenchmarkKernelChange measures what one Service change costs in the kernel
// at N Service ports: two throwaway namespaces each hold N ports (2
// endpoints each, every tenth a NodePort), one with the sharded layout, the
// reference with all Service NAT in one table (the layout before sharding,
// as kube-proxy's nftables mode has it). Each iteration adds one Service
// port to both, in turns (A B A B …), and removes it again; the metrics are
// the p50 and p99 of the adds (a partial sync over netlink, commit included)
// and their ratio reference/sharded.
//
//	go test -run '^$' -bench KernelChange -benchtime 50x ./internal/dataplane/nftables
func BenchmarkKernelChange(b *testing.B) {
	for _, n := range []int{1000, 10000, 30000} {
		b.Run(fmt.Sprintf("ports=%d", n), func(b *testing.B) { benchKernelChange(b, n) })
	}
}

type benchSide struct {
	name string
	be   *Backend
	conn *timedConn
	adds []time.Duration
	// commits are the adds' Apply calls alone.
	commits []time.Duration
}

// timedConn times each Apply: the kernel's share of a change.
type timedConn struct {
	nft.Conn
	last time.Duration
}

func (c *timedConn) Apply(ctx context.Context, txs ...*nft.Tx) error {
	start := time.Now()
	err := c.Conn.Apply(ctx, txs...)
	c.last = time.Since(start)
	return err
}

func benchKernelChange(b *testing.B, n int) {
	ctx := context.Background()
	base := manyPorts(n)
	sides := []*benchSide{{name: "sharded"}, {name: "one-table"}}
	full := map[string]time.Duration{}
	for i, s := range sides {
		ns := netnstest.New(b, "nftbench")
		conn, err := netlink.New(ns)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		s.conn = &timedConn{Conn: conn}
		s.be = New(s.conn)
		if i == 1 {
			s.be.shards = 1
		}
		start := time.Now()
		if _, err := s.be.Sync(ctx, base, false); err != nil {
			b.Fatalf("%s: full sync of %d ports: %v", s.name, n, err)
		}
		full[s.name] = time.Since(start)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		added := sp("bench", fmt.Sprintf("change%d", i), "", model.ProtocolTCP,
			netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)}).String(), 80,
			ep("192.168.1.200", 8080, true), ep("192.168.2.200", 8080, false))
		with := &servicetable.Table{Node: base.Node, Ports: append(slices.Clone(base.Ports), added)}
		for _, s := range sides {
			start := time.Now()
			if _, err := s.be.Sync(ctx, with, false); err != nil {
				b.Fatalf("%s: add: %v", s.name, err)
			}
			s.adds = append(s.adds, time.Since(start))
			s.commits = append(s.commits, s.conn.last)
			if _, err := s.be.Sync(ctx, base, false); err != nil {
				b.Fatalf("%s: remove: %v", s.name, err)
			}
		}
	}
	b.StopTimer()
	for _, s := range sides {
		b.ReportMetric(ms(full[s.name]), s.name+"-full-ms")
		b.ReportMetric(ms(percentile(s.adds, 50)), s.name+"-p50-ms")
		b.ReportMetric(ms(percentile(s.adds, 99)), s.name+"-p99-ms")
		b.ReportMetric(ms(percentile(s.commits, 50)), s.name+"-commit-p50-ms")
	}
	b.ReportMetric(ms(percentile(sides[1].adds, 50))/ms(percentile(sides[0].adds, 50)), "ratio-p50")
	b.ReportMetric(ms(percentile(sides[1].adds, 99))/ms(percentile(sides[0].adds, 99)), "ratio-p99")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile returns the q-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*q + 99) / 100
	return s[max(i-1, 0)]
}
