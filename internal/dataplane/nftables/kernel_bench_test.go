package nftables

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// BenchmarkKernelChange measures what one Service change costs in the kernel
// at N Service ports: three throwaway namespaces each hold N ports (2
// endpoints each, every tenth a NodePort), one with the sharded layout, the
// reference with all Service NAT in one table (the layout before sharding,
// as kube-proxy's nftables mode has it), and one with 16 shards (finer, as
// svcnet had them before BenchmarkKernelShardConnect priced a shard). Each
// iteration adds one Service port to each, in turns (A B C A B C …), and
// removes it again, the tables coming from a servicetable.Assembler as the
// proxy's do (each follows the last by its Delta); the metrics are the p50 and p99 of the adds (a partial
// sync over netlink, commit included), the commits' p50, and the ratio
// reference/sharded.
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
	asm := servicetable.NewAssembler(testNode())
	for _, p := range manyPorts(n).Ports {
		asm.Set(model.ServiceKey{Namespace: p.Name.Namespace, Name: p.Name.Name}, []*servicetable.ServicePort{p})
	}
	base := asm.Table()
	sides := []*benchSide{{name: "sharded"}, {name: "one-table"}, {name: "k16"}}
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
		s.be.shards = []int{0, 1, 16}[i] // 0: the count the backend picks
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
		key := model.ServiceKey{Namespace: added.Name.Namespace, Name: added.Name.Name}
		asm.Set(key, []*servicetable.ServicePort{added})
		with := asm.Table()
		asm.Set(key, nil)
		base = asm.Table()
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

// BenchmarkKernelShardConnect measures what the shard count costs a new
// connection that matches no Service, as one to a pod IP does: it meets every
// shard's nat base chain (shard.go). Five server namespaces each hold the
// same 10k Service ports, laid out in 1, 2, 4, 8 and 16 shards; a client namespace
// reaches each over a veth of its own, and each iteration times one TCP
// connect to each server in turn (A B C A B C …, so drift meets all alike).
// Metrics: each count's p50 connect time, and its excess over one shard, in
// µs (the cost on one node; a connection crosses it on each node it enters).
//
//	go test -run '^$' -bench KernelShardConnect -benchtime 4000x ./internal/dataplane/nftables
func BenchmarkKernelShardConnect(b *testing.B) {
	ctx := context.Background()
	cli := netnstest.New(b, "nftconn-cli")
	if err := cli.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/tcp_tw_reuse", []byte("1"), 0o644) }); err != nil {
		b.Fatal(err)
	}
	ports := manyPorts(10000)
	counts := []int{1, 2, 4, 8, 16}
	addrs := make([]string, len(counts))
	times := make([][]time.Duration, len(counts))
	for i, k := range counts {
		srv := netnstest.New(b, fmt.Sprintf("nftconn-%d", k))
		cliIf, srvIf := fmt.Sprintf("c%d", i), fmt.Sprintf("s%d", i)
		cliAddr, srvAddr := fmt.Sprintf("10.250.%d.1/24", i), fmt.Sprintf("10.250.%d.2/24", i)
		for _, args := range [][]string{
			{"-n", cli.Name(), "link", "add", cliIf, "type", "veth", "peer", "name", srvIf, "netns", srv.Name()},
			{"-n", cli.Name(), "addr", "add", cliAddr, "dev", cliIf},
			{"-n", srv.Name(), "addr", "add", srvAddr, "dev", srvIf},
			{"-n", cli.Name(), "link", "set", cliIf, "up"},
			{"-n", srv.Name(), "link", "set", srvIf, "up"},
			{"-n", srv.Name(), "link", "set", "lo", "up"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				b.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
			}
		}
		conn, err := netlink.New(srv)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		be := New(conn, ipfamily.IPv4)
		be.shards = k
		if _, err := be.Sync(ctx, ports, false); err != nil {
			b.Fatalf("%d shards: full sync: %v", k, err)
		}
		ln := netnstest.ClosingServer(b, srv, "tcp4", strings.TrimSuffix(srvAddr, "/24")+":8080")
		addrs[i] = ln.Addr().String()
	}
	connect := func(addr string) (time.Duration, error) {
		var d time.Duration
		err := cli.Do(func() error {
			var dl net.Dialer
			start := time.Now()
			c, err := dl.DialContext(ctx, "tcp4", addr)
			d = time.Since(start)
			if err != nil {
				return err
			}
			return c.Close()
		})
		return d, err
	}
	for _, a := range addrs { // warm each path once
		if _, err := connect(a); err != nil {
			b.Fatalf("connect %s: %v", a, err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for i, a := range addrs {
			d, err := connect(a)
			if err != nil {
				b.Fatalf("connect %s: %v", a, err)
			}
			times[i] = append(times[i], d)
		}
	}
	b.StopTimer()
	base := percentile(times[0], 50)
	for i, k := range counts {
		p50 := percentile(times[i], 50)
		b.ReportMetric(float64(p50.Nanoseconds())/1000, fmt.Sprintf("k%d-p50-us", k))
		b.ReportMetric(float64((p50-base).Nanoseconds())/1000, fmt.Sprintf("k%d-over-k1-us", k))
	}
}
