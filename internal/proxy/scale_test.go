package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// BenchmarkPartialSync10k measures the user-space cost of one Service change
// at 10k Services: rebuild its entries, update the assembled table, diff and build the
// transaction (applied to a fake kernel, so the kernel's share is left out).
func BenchmarkPartialSync10k(b *testing.B) {
	const n = 10000
	cfg := servicetable.NodeConfig{NodeName: "node1"}
	asm := servicetable.NewAssembler(cfg)
	states := make([]*model.ServiceState, n)
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		cip := netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)})
		st := &model.ServiceState{Service: service(name, cip.String(), 80, model.ProtocolTCP),
			Slices: []*model.EndpointSlice{slice(name, 80, model.ProtocolTCP,
				netip.AddrFrom4([4]byte{10, 200, byte(i >> 7), byte(2 * i)}).String(),
				netip.AddrFrom4([4]byte{10, 200, byte(i >> 7), byte(2*i + 1)}).String())}}
		states[i] = st
		ports, _ := servicetable.BuildService(st, cfg)
		asm.Set(st.Service.Key(), ports)
	}
	be := nftables.New(nullConn{}, ipfamily.IPv4)
	ctx := context.Background()
	if _, err := be.Sync(ctx, asm.Table(), false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := i % n
		st := *states[j]
		st.Slices = []*model.EndpointSlice{slice(st.Service.Name, 80, model.ProtocolTCP, fmt.Sprintf("10.201.%d.%d", (i>>8)&255, i&255))}
		ports, _ := servicetable.BuildService(&st, cfg)
		asm.Set(st.Service.Key(), ports)
		if _, err := be.Sync(ctx, asm.Table(), false); err != nil {
			b.Fatal(err)
		}
	}
}

// nullConn accepts every transaction and holds nothing: the benchmark measures
// svcnet's own work, not the fake kernel's.
type nullConn struct{}

func (nullConn) Apply(context.Context, ...*nft.Tx) error                   { return nil }
func (nullConn) Tables(context.Context, ipfamily.Family) ([]string, error) { return nil, nil }
func (nullConn) Read(context.Context, ipfamily.Family, string) (*nft.Table, error) {
	return nil, nft.ErrNoTable
}
func (nullConn) Generation(context.Context) (uint32, error) { return 0, nil }
