package model

import (
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// TestCowMapMatchesMap: random writes to a chain of clones behave as writes
// to a plain map per version, and never change an earlier version.
func TestCowMapMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cur := &cowMap[string, int]{}
	want := map[string]int{}
	type version struct {
		m    *cowMap[string, int]
		want map[string]int
	}
	var versions []version
	for round := range 200 {
		next := cur.clone()
		for range r.IntN(20) {
			k := strconv.Itoa(r.IntN(1000))
			if r.IntN(3) == 0 {
				next.del(k)
				delete(want, k)
			} else {
				next.set(k, round)
				want[k] = round
			}
		}
		versions = append(versions, version{next, maps.Clone(want)})
		cur = next
	}
	for i, v := range versions {
		got := maps.Collect(v.m.all())
		if !maps.Equal(got, v.want) || v.m.len() != len(v.want) {
			t.Fatalf("version %d: %d keys (len %d), want %d, equal %v", i, len(got), v.m.len(), len(v.want), maps.Equal(got, v.want))
		}
		for k, val := range v.want {
			if g, ok := v.m.lookup(k); !ok || g != val || v.m.get(k) != val {
				t.Fatalf("version %d: %s = %d %v, want %d", i, k, g, ok, val)
			}
		}
		if _, ok := v.m.lookup("absent"); ok {
			t.Fatalf("version %d: absent key found", i)
		}
	}
}

// TestCowMapCloneCopiesOnlyWrittenShards: a one-key write to a clone of a
// large map leaves every other shard shared.
func TestCowMapCloneCopiesOnlyWrittenShards(t *testing.T) {
	m := &cowMap[int, int]{}
	for i := range 10000 {
		m.set(i, i)
	}
	c := m.clone()
	c.set(5, -5)
	shared := 0
	for i := range cowShards {
		if len(m.shards[i]) > 0 && sameMap(m.shards[i], c.shards[i]) {
			shared++
		}
	}
	if shared != cowShards-1 {
		t.Errorf("%d of %d shards shared after a one-key write, want %d", shared, cowShards, cowShards-1)
	}
	if m.get(5) != 5 || c.get(5) != -5 {
		t.Errorf("original 5 = %d, clone 5 = %d", m.get(5), c.get(5))
	}
}

// sameMap reports whether a and b are one map (a write through one shows
// through the other).
func sameMap(a, b map[int]int) bool {
	const probe = -1
	if _, ok := a[probe]; ok {
		return false
	}
	a[probe] = 1
	_, same := b[probe]
	delete(a, probe)
	return same
}

// BenchmarkStoreUpdate10k measures one Service change in a store of 10k
// Services with a slice each, and the garbage it leaves (allocs/op, B/op).
func BenchmarkStoreUpdate10k(b *testing.B) {
	s := NewStore()
	s.Update(func(tx *Txn) {
		for i := range 10000 {
			name := "svc-" + strconv.Itoa(i)
			tx.SetService(&Service{Namespace: "bench", Name: name})
			tx.SetEndpointSlice(&EndpointSlice{Namespace: "bench", Name: name + "-1", Service: name, AddressType: ipfamily.IPv4})
		}
	})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		name := "svc-" + strconv.Itoa(i%10000)
		s.Update(func(tx *Txn) {
			tx.SetService(&Service{Namespace: "bench", Name: name, Type: ServiceType(strconv.Itoa(i))})
		})
	}
}
