package nftables

import (
	"context"
	"slices"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// TestKernelShards programs 5200 Service ports (4 shards) into a throwaway
// namespace's kernel: the kernel accepts the sharded layout in one batch, a
// restarted backend adopts it without an operation, a one-port change
// applies partially, and shrinking to 1000 ports reshards to one shard and
// deletes the other three tables.
func TestKernelShards(t *testing.T) {
	ns := netnstest.New(t, "nftshard")
	conn, err := netlink.New(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	all := manyPorts(5200)
	names := func() []string {
		t.Helper()
		n, err := conn.Tables(ctx, ipfamily.IPv4)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := New(conn, ipfamily.IPv4).Sync(ctx, all, false); err != nil {
		t.Fatalf("full sync of 5200 ports: %v", err)
	}
	want := []string{TableName, ShardTable(0), ShardTable(1), ShardTable(2), ShardTable(3)}
	if got := names(); !slices.Equal(got, want) {
		t.Fatalf("tables %v, want %v", got, want)
	}
	b := New(conn, ipfamily.IPv4)
	st, err := b.Sync(ctx, all, false)
	if err != nil || st.TotalOps() != 0 {
		t.Fatalf("a restarted backend changed %d ops of the kernel's 4 shards (err %v)", st.TotalOps(), err)
	}
	next := clonePorts(all)
	replacePort(next, all.Ports[7].ID, func(sp *servicetable.ServicePort) { setEndpoints(sp, ep("192.168.3.3", 8080, false)) })
	if st, err = b.Sync(ctx, next, false); err != nil || st.Full || st.TotalOps() == 0 {
		t.Fatalf("one change: %+v, %v", st, err)
	}
	small := &servicetable.Table{Node: next.Node, Ports: next.Ports[:1000]}
	if st, err = b.Sync(ctx, small, false); err != nil || !st.Full {
		t.Fatalf("shrink to 1000 ports: %+v, %v", st, err)
	}
	if got := names(); !slices.Equal(got, []string{TableName, ShardTable(0)}) {
		t.Fatalf("after the shrink: tables %v", got)
	}
	if st, err := New(conn, ipfamily.IPv4).Sync(ctx, small, false); err != nil || st.TotalOps() != 0 {
		t.Fatalf("the kernel differs from the 1000-port layout: %d ops (err %v)", st.TotalOps(), err)
	}
}
