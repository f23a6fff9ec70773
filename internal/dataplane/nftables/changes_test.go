package nftables

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// deltaCluster returns the entries of n+20 Services by Service: n IPv4 ones
// from manyPorts, a tenth of them dual-stack (an IPv6 entry of the same ID),
// and 20 IPv6-only.
func deltaCluster(n int) map[model.ServiceKey][]*servicetable.ServicePort {
	out := map[model.ServiceKey][]*servicetable.ServicePort{}
	key := func(sp *servicetable.ServicePort) model.ServiceKey {
		return model.ServiceKey{Namespace: sp.Name.Namespace, Name: sp.Name.Name}
	}
	for i, p := range manyPorts(n).Ports {
		out[key(p)] = append(out[key(p)], p)
		if i%10 == 0 {
			v6 := sp(p.Name.Namespace, p.Name.Name, "", model.ProtocolTCP, fmt.Sprintf("fd00:96::%x", i+1), 80,
				ep(fmt.Sprintf("fd00:192:168::%x", i+1), 8080, true))
			out[key(v6)] = append(out[key(v6)], v6)
		}
	}
	for i := range 20 {
		v6 := sp("v6", fmt.Sprintf("only%02d", i), "dns", model.ProtocolUDP, fmt.Sprintf("fd00:96::1:%x", i), 53,
			ep(fmt.Sprintf("fd00:192:168::1:%x", i), 53, false))
		out[key(v6)] = append(out[key(v6)], v6)
	}
	return out
}

// sameChanges reports whether a and b hold the same changes, entries
// compared by pointer.
func sameChanges(a, b []change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSyncFollowsDelta drives an Assembler through random changes (entries
// rebuilt, Services removed and added back, several changes between two
// tables) and syncs each table twice: as built, which a backend follows by
// its Delta, and without the Delta, which another backend compares whole.
// Each time the changes taken from the Delta equal those found by the walk,
// and both kernels hold exactly what a fresh render of the table gives.
func TestSyncFollowsDelta(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	cluster := deltaCluster(150)
	keys := make([]model.ServiceKey, 0, len(cluster))
	for k := range cluster {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b model.ServiceKey) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	asm := servicetable.NewAssembler(testNode())
	current := map[model.ServiceKey][]*servicetable.ServicePort{}
	for _, k := range keys {
		current[k] = cluster[k]
		asm.Set(k, cluster[k])
	}
	kd, kw := nft.NewFake(), nft.NewFake()
	bd, bw := New(kd), New(kw)
	followed := 0
	for step := range 80 {
		tbl := asm.Table()
		if step > 0 {
			for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
				fs := bd.state[f]
				got, gotN, ok := fs.deltaChanges(tbl, f)
				want, wantN := fs.walkChanges(splitFamilies(tbl)[f])
				if !ok {
					t.Fatalf("step %d %s: the Delta of the next table was not followed", step, f)
				}
				if !sameChanges(got, want) || gotN != wantN {
					t.Fatalf("step %d %s: Delta gives %d changes of %d entries, the walk %d of %d", step, f, len(got), gotN, len(want), wantN)
				}
				followed += len(got)
			}
		}
		st, err := bd.Sync(ctx, tbl, false)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if step > 0 && st.Full {
			t.Fatalf("step %d: a table that follows the last one synced in full", step)
		}
		bare := *tbl
		bare.Seq, bare.Delta = 0, nil
		if _, err := bw.Sync(ctx, &bare, false); err != nil {
			t.Fatalf("step %d (walk): %v", step, err)
		}
		kernelMatches(t, kd, tbl)
		kernelMatches(t, kw, tbl)

		for range 1 + r.IntN(4) {
			k := keys[r.IntN(len(keys))]
			switch op := r.IntN(4); {
			case op == 0 && current[k] != nil: // gone
				delete(current, k)
				asm.Set(k, nil)
			case op == 1: // back as it was, or the same entries again
				current[k] = cluster[k]
				asm.Set(k, cluster[k])
			default: // rebuilt with other endpoints
				var next []*servicetable.ServicePort
				for _, p := range cluster[k] {
					cp := *p
					a := p.ClusterIP.As16()
					a[15] ^= byte(1 + r.IntN(200))
					setEndpoints(&cp, ep(netip.AddrFrom16(a).Unmap().String(), 9090, r.IntN(2) == 0))
					next = append(next, &cp)
				}
				current[k] = next
				asm.Set(k, next)
			}
		}
	}
	if followed < 150 {
		t.Fatalf("only %d changes followed from Deltas", followed)
	}
}

// TestSyncDeltaFallsBack: a Delta from a table this backend did not program
// (another Assembler's, or one after a failed sync) is not followed: the
// backend compares every entry or syncs in full, and the kernel ends equal
// to the table.
func TestSyncDeltaFallsBack(t *testing.T) {
	ctx := context.Background()
	cluster := deltaCluster(150)
	k := nft.NewFake()
	b := New(k)
	asm := servicetable.NewAssembler(testNode())
	for key, ports := range cluster {
		asm.Set(key, ports)
	}
	if _, err := b.Sync(ctx, asm.Table(), false); err != nil {
		t.Fatal(err)
	}

	// Another Assembler's second table: its Delta starts elsewhere.
	other := servicetable.NewAssembler(testNode())
	for key, ports := range cluster {
		other.Set(key, ports)
	}
	other.Table()
	key := model.ServiceKey{Namespace: "v6", Name: "only03"}
	other.Set(key, nil)
	elsewhere := other.Table()
	if _, _, ok := b.state[ipfamily.IPv6].deltaChanges(elsewhere, ipfamily.IPv6); ok {
		t.Fatal("followed the Delta of another Assembler's table")
	}
	if st, err := b.Sync(ctx, elsewhere, false); err != nil || st.Full || st.Ops[ipfamily.IPv6] == 0 {
		t.Fatalf("another Assembler's table: %+v, %v; want a partial sync that removes %s", st, err, key)
	}
	kernelMatches(t, k, elsewhere)

	// A failed sync: the next table's Delta follows one the kernel lacks.
	failed := model.ServiceKey{Namespace: "v6", Name: "only04"}
	asm.Set(failed, nil)
	k.FailApply = func(*nft.Tx) error { return errors.New("refused") }
	if _, err := b.Sync(ctx, asm.Table(), false); err == nil {
		t.Fatal("a refused transaction: no error")
	}
	k.FailApply = nil
	asm.Set(failed, cluster[failed])
	next := asm.Table()
	if st, err := b.Sync(ctx, next, false); err != nil || !st.Full {
		t.Fatalf("after a failed sync: %+v, %v; want a full sync", st, err)
	}
	kernelMatches(t, k, next)
}
