package nftables

import (
	"context"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// appliesNothing is a kernel that takes every transaction and keeps none.
type appliesNothing struct{ nft.Conn }

func (appliesNothing) Apply(context.Context, ...*nft.Tx) error { return nil }

// BenchmarkPartialSync: one changed Service port of 10,000: what a partial
// sync costs the proxy, the kernel aside (after a full sync on the fake
// kernel, the transactions go to one that keeps nothing).
func BenchmarkPartialSync(b *testing.B) {
	ctx := context.Background()
	base := manyPorts(10000)
	sortPorts(base)
	k := nft.NewFake()
	be := New(k, ipfamily.IPv4)
	if _, err := be.Sync(ctx, base, false); err != nil {
		b.Fatal(err)
	}
	be.conn = appliesNothing{k}
	eps := [][]servicetable.Endpoint{{ep("192.168.3.3", 8080, false)}, {ep("192.168.3.4", 8080, false)}}
	i := 0
	for b.Loop() {
		next := clonePorts(base)
		replacePort(next, base.Ports[1234].ID, func(sp *servicetable.ServicePort) { setEndpoints(sp, eps[i%2]...) })
		i++
		if st, err := be.Sync(ctx, next, false); err != nil || st.Full {
			b.Fatalf("%+v %v", st, err)
		}
	}
}
