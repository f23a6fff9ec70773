package ebpf

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// TestSyncFollowsDelta drives an Assembler through random changes of a
// dual-stack cluster and syncs every table to two planes: one given the
// table as built (it follows the Delta), one given it without (it compares
// every port). Both make the same map calls and hold the same frontends,
// and the first takes its changes from the Delta every time.
func TestSyncFollowsDelta(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	asm := servicetable.NewAssembler(servicetable.NodeConfig{NodeName: "node1"})
	const n = 60
	key := func(i int) model.ServiceKey {
		return model.ServiceKey{Namespace: "default", Name: fmt.Sprintf("s%02d", i)}
	}
	build := func(i, v int) []*servicetable.ServicePort {
		id := fmt.Sprintf("default/s%02d:80/tcp", i)
		var eps []servicetable.Endpoint
		for e := range v % 4 {
			eps = append(eps, ep(fmt.Sprintf("192.168.%d.%d:8080", e, i), e == 0))
		}
		ports := []*servicetable.ServicePort{clusterIPPort(id, fmt.Sprintf("10.96.0.%d:80", i), eps...)}
		if i%3 == 0 {
			ports = append(ports, clusterIPPort(id, fmt.Sprintf("[fd00:96::%x]:80", i)))
		}
		return ports
	}
	for i := range n {
		asm.Set(key(i), build(i, i))
	}
	pd, lbd, _ := newTestPlane(t)
	pw, lbw, _ := newTestPlane(t)
	followed := 0
	for step := range 80 {
		tbl := asm.Table()
		if step > 0 {
			added, removed, ok := pd.sockets.delta(tbl, false, pd.families)
			if !ok {
				t.Fatalf("step %d: the Delta was not followed", step)
			}
			followed += len(added) + len(removed)
		}
		callsD, callsW := lbd.calls, lbw.calls
		std := mustSync(t, pd, tbl, false)
		bare := *tbl
		bare.Seq, bare.Delta = 0, nil
		mustSync(t, pw, &bare, false)
		if step > 0 && std.Full {
			t.Fatalf("step %d: a table following the last one synced whole", step)
		}
		if got, want := held(lbd), held(lbw); !slices.Equal(got, want) || lbd.calls-callsD != lbw.calls-callsW {
			t.Fatalf("step %d: following the Delta holds %q after %d calls; comparing every port, %q after %d",
				step, got, lbd.calls-callsD, want, lbw.calls-callsW)
		}
		for range 1 + r.IntN(3) {
			i := r.IntN(n)
			if r.IntN(4) == 0 {
				asm.Set(key(i), nil)
			} else {
				asm.Set(key(i), build(i, r.IntN(8)))
			}
		}
	}
	if followed < 100 {
		t.Fatalf("only %d ports followed from Deltas", followed)
	}
	if len(held(lbd)) < n/2 || !slices.ContainsFunc(held(lbd), func(s string) bool { return s[0] == '[' }) {
		t.Fatalf("generator too tame: holds %q", held(lbd))
	}
}
