package proxy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// randomEntry returns an entry of Service i with random protocol, family,
// policies, local endpoints and health check port.
func randomEntry(r *rand.Rand, i int) *servicetable.ServicePort {
	proto := []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP}[r.IntN(3)]
	cip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
	if r.IntN(3) == 0 {
		cip = netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x96, 14: byte(i >> 8), 15: byte(i)})
	}
	sp := &servicetable.ServicePort{
		ID:                  fmt.Sprintf("ns/svc%03d:/%s", i, proto),
		Name:                servicetable.PortName{Namespace: "ns", Name: fmt.Sprintf("svc%03d", i), Protocol: proto},
		Protocol:            proto,
		Family:              ipfamily.Of(cip),
		ClusterIP:           cip,
		Port:                80,
		InternalPolicyLocal: r.IntN(3) == 0,
		ExternalPolicyLocal: r.IntN(3) == 0,
	}
	if r.IntN(2) == 0 {
		sp.LocalEndpoints = []servicetable.Endpoint{{Addr: netip.AddrFrom4([4]byte{192, 168, 1, byte(i)}), Port: 8080, Local: true, Ready: true}}
	}
	if r.IntN(4) == 0 {
		sp.HealthCheckNodePort = uint16(32000 + i)
	}
	return sp
}

// TestSummaryFollowsDelta: after random changes to an Assembler's entries,
// the summary that followed every table's Delta equals one counted from
// the whole table, and a table whose Delta does not follow is counted whole.
func TestSummaryFollowsDelta(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	asm := servicetable.NewAssembler(servicetable.NodeConfig{NodeName: "node1"})
	key := func(i int) model.ServiceKey {
		return model.ServiceKey{Namespace: "ns", Name: fmt.Sprintf("svc%03d", i)}
	}
	for i := range 200 {
		asm.Set(key(i), []*servicetable.ServicePort{randomEntry(r, i)})
	}
	var s summary
	opts := cmp.Options{cmp.AllowUnexported(summary{}, noLocalKey{}), cmp.Comparer(func(a, b *servicetable.ServicePort) bool { return a == b })}
	moved := 0
	for step := range 100 {
		tbl := asm.Table()
		s.follow(tbl)
		var whole summary
		bare := *tbl
		bare.Delta = nil
		whole.follow(&bare)
		clean(s.services)
		clean(s.noLocal)
		clean(whole.services)
		clean(whole.noLocal)
		if d := cmp.Diff(whole, s, opts); d != "" {
			t.Fatalf("step %d: summary differs from the whole table's (-whole +followed):\n%s", step, d)
		}
		if tbl.Delta != nil {
			moved += len(tbl.Delta.Removed) + len(tbl.Delta.Added)
		}
		for range 1 + r.IntN(5) {
			i := r.IntN(200)
			if r.IntN(4) == 0 {
				asm.Set(key(i), nil)
			} else {
				asm.Set(key(i), []*servicetable.ServicePort{randomEntry(r, i)})
			}
		}
	}
	// A summary that saw none of the tables before counts the last whole.
	tbl := asm.Table()
	var late, whole summary
	late.follow(tbl)
	bare := *tbl
	bare.Delta = nil
	whole.follow(&bare)
	if d := cmp.Diff(whole, late, opts, cmpopts.IgnoreFields(summary{}, "seq")); d != "" || late.seq != tbl.Seq {
		t.Fatalf("a Delta from a table not seen (-whole +got):\n%s", d)
	}
	if moved < 300 {
		t.Fatalf("only %d entries moved", moved)
	}
	if len(s.health) == 0 || len(s.datagram) == 0 || len(s.noLocal) < 4 {
		t.Fatalf("generator too tame: %d health check entries, %d datagram ones, %d no-local counts", len(s.health), len(s.datagram), len(s.noLocal))
	}
}

// clean drops zero counts, which following a Delta leaves and counting
// whole does not make.
func clean[K comparable](m map[K]int) {
	for k, n := range m {
		if n == 0 {
			delete(m, k)
		}
	}
}
