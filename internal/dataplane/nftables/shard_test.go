package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

func TestShardCount(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 1}, {1, 1}, {2560, 1}, {2561, 2}, {5120, 2}, {5121, 4},
		{10000, 4}, {10241, 8}, {30000, 16}, {1 << 30, maxShards},
	} {
		if got := shardsFor(c.n); got != c.want {
			t.Errorf("shardsFor(%d) = %d, want %d", c.n, got, c.want)
		}
		if !keepShards(shardsFor(c.n), c.n) {
			t.Errorf("keepShards(shardsFor(%d), %d) = false: a fresh layout must be kept", c.n, c.n)
		}
	}
	for _, c := range []struct {
		k, n int
		keep bool
	}{
		{0, 0, false},              // no layout yet
		{1, 0, true},               // one shard is never too many
		{1, 5120, true},            // up to twice the ports per shard
		{1, 5121, false},           // then it grows
		{4, 2560, true},            // a quarter of the ports per shard
		{4, 2559, false},           // then it shrinks
		{4, 10000, true},           //
		{16, 10000, false},         // a finer layout (of an older svcnet) shrinks
		{maxShards, 1 << 30, true}, // it cannot grow further
		{maxShards + 1, 10, false}, // a count svcnet never makes
	} {
		if got := keepShards(c.k, c.n); got != c.keep {
			t.Errorf("keepShards(%d, %d) = %v, want %v", c.k, c.n, got, c.keep)
		}
	}
}

func TestIsTable(t *testing.T) {
	for name, want := range map[string]bool{
		"svcnet": true, "svcnet-nat-00": true, "svcnet-nat-63": true,
		"svcnet-nat-64": false, "svcnet-nat-0": false, "svcnet-nat-007": false, "svcnet-nat-x1": false,
		"svcnet-hostport": false, "svcnet-trace-42": false, "kube-proxy": false, "": false,
	} {
		if got := IsTable(name); got != want {
			t.Errorf("IsTable(%q) = %v, want %v", name, got, want)
		}
	}
}

// manyPorts returns a table of n ClusterIP Service ports with two endpoints,
// every tenth one also a NodePort (unique up to 27k ports; the main table's maps get elements too:
// every 50th has no endpoints, every 70th a source-ranged LB IP).
func manyPorts(n int) *servicetable.Table {
	node := testNode()
	t := &servicetable.Table{Node: node}
	for i := range n {
		cip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String()
		var eps []servicetable.Endpoint
		if i%50 != 0 {
			eps = []servicetable.Endpoint{
				ep(netip.AddrFrom4([4]byte{192, 168, 1, byte(i)}).String(), 8080, true),
				ep(netip.AddrFrom4([4]byte{192, 168, 2, byte(i)}).String(), 8080, false),
			}
		}
		p := sp(fmt.Sprintf("ns%d", i%7), fmt.Sprintf("svc%05d", i), "", model.ProtocolTCP, cip, 80, eps...)
		if i%10 == 0 {
			withNodePort(p, uint16(30000+i/10), node)
		}
		if i%70 == 0 {
			withLB(p, netip.AddrFrom4([4]byte{172, 26, 237, byte(i / 70)}).String(), "10.0.0.0/8")
		}
		t.Ports = append(t.Ports, p)
	}
	slices.SortFunc(t.Ports, func(a, b *servicetable.ServicePort) int { return strings.Compare(a.ID, b.ID) })
	return t
}

func shardNames(t *testing.T, k *nft.Fake) []string {
	t.Helper()
	names, err := k.Tables(context.Background(), ipfamily.IPv4)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestShardedSyncFollowsTheCount grows a table past the shard thresholds and
// shrinks it again: each step is programmed partially or, when the count
// changes, by one full sync that moves every port and deletes the shards no
// longer used; the kernel always equals a fresh render.
func TestShardedSyncFollowsTheCount(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	b := New(k)
	all := manyPorts(5200)
	steps := []struct {
		n      int
		full   bool
		shards int
	}{
		{100, true, 1}, {2000, false, 1}, {5200, true, 4}, {2600, false, 4}, {2500, true, 1},
	}
	for i, s := range steps {
		tbl := &servicetable.Table{Node: all.Node, Ports: all.Ports[:s.n]}
		st, err := b.Sync(ctx, tbl, false)
		if err != nil {
			t.Fatalf("step %d (%d ports): %v", i, s.n, err)
		}
		if st.Full != s.full || st.Drift {
			t.Fatalf("step %d (%d ports): full=%v drift=%v, want full=%v", i, s.n, st.Full, st.Drift, s.full)
		}
		want := []string{TableName}
		for j := range s.shards {
			want = append(want, ShardTable(j))
		}
		if got := shardNames(t, k); !slices.Equal(got, want) {
			t.Fatalf("step %d (%d ports): tables %v, want %v", i, s.n, got, want)
		}
		// Kept counts may differ from a fresh render's: compare with a
		// render at the count the step expects.
		rendered := renderFamily(configFor(ipfamily.IPv4, tbl.Node), tbl.Ports, s.shards)
		rendered = append(rendered, Render(&servicetable.Table{Node: tbl.Node}, ipfamily.IPv6)...)
		if got := kernelDump(t, k); got != renderAll(rendered) {
			t.Fatalf("step %d (%d ports): the kernel differs from a render with %d shards", i, s.n, s.shards)
		}
	}
}

// TestShardedPartialSyncTouchesOneShard changes one Service port at 5200
// ports (4 shards): the transaction touches only that port's shard (and the
// main table for its ClusterIP), and the result equals a fresh render. A
// restarted proxy adopts all shards without a change.
func TestShardedPartialSyncTouchesOneShard(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	tbl := manyPorts(5200)
	b := New(k)
	if _, err := b.Sync(ctx, tbl, false); err != nil {
		t.Fatal(err)
	}
	var touched []string
	k.FailApply = func(tx *nft.Tx) error { touched = append(touched, tx.Table); return nil }
	next := clonePorts(tbl)
	id := tbl.Ports[1234].ID
	replacePort(next, id, func(sp *servicetable.ServicePort) { setEndpoints(sp, ep("192.168.3.3", 8080, false)) })
	st, err := b.Sync(ctx, next, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Full || st.TotalOps() == 0 {
		t.Fatalf("one change: %+v", st)
	}
	if want := []string{ShardTable(shardOf(id, 4))}; !slices.Equal(touched, want) {
		t.Fatalf("one endpoint change touched %v, want %v", touched, want)
	}
	// A new Service port: its shard and the main table's cluster-ips.
	touched = nil
	added := sp("ns-new", "new", "", model.ProtocolTCP, "10.97.0.1", 80, ep("192.168.1.1", 80, true))
	next2 := clonePorts(next)
	next2.Ports = append(next2.Ports, added)
	if _, err := b.Sync(ctx, next2, false); err != nil {
		t.Fatal(err)
	}
	if want := []string{TableName, ShardTable(shardOf(added.ID, 4))}; !slices.Equal(touched, want) {
		t.Fatalf("a new Service touched %v, want %v", touched, want)
	}
	k.FailApply = nil
	kernelMatches(t, k, next2)

	applied := k.Applied
	st, err = New(k).Sync(ctx, next2, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalOps() != 0 || k.Applied != applied {
		t.Fatalf("a restarted proxy changed %d ops of 4 shards: %+v", st.TotalOps(), st)
	}
}

// TestFullSyncReplacesTheUnshardedLayout: an older svcnet kept the Service
// NAT in the main table; a full sync moves it to the shards in one
// transaction and leaves tables that are not svcnet's alone.
func TestFullSyncReplacesTheUnshardedLayout(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	tbl := featureTable()
	// The old layout: everything in one table named svcnet.
	old := nft.NewTable(ipfamily.IPv4, TableName)
	for _, tb := range Render(tbl, ipfamily.IPv4) {
		merge(old, tb)
	}
	tx := nft.NewTx(ipfamily.IPv4, TableName)
	tx.AddTable()
	diff(tx, nil, old, func(string) bool { return true })
	other := nft.NewTx(ipfamily.IPv4, "someone-else")
	other.AddTable()
	if err := k.Apply(ctx, tx, other); err != nil {
		t.Fatal(err)
	}
	st, err := New(k, ipfamily.IPv4).Sync(ctx, tbl, false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full || st.TotalOps() == 0 {
		t.Fatalf("upgrade: %+v", st)
	}
	if got, want := shardNames(t, k), []string{"someone-else", TableName, ShardTable(0)}; !slices.Equal(got, want) {
		t.Fatalf("tables %v, want %v", got, want)
	}
	if d := kernelDump(t, k); d != renderAll(Render(tbl, ipfamily.IPv4)) {
		t.Fatalf("after the upgrade the kernel holds:\n%s", d)
	}
}
