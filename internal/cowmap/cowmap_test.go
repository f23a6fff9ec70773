package cowmap

import (
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestMapMatchesMap: random writes to a chain of clones behave as writes
// to a plain map per version, and never change an earlier version.
func TestMapMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cur := &Map[string, int]{}
	want := map[string]int{}
	type version struct {
		m    *Map[string, int]
		want map[string]int
	}
	var versions []version
	for round := range 200 {
		next := cur.Clone()
		for range r.IntN(20) {
			k := strconv.Itoa(r.IntN(1000))
			if r.IntN(3) == 0 {
				next.Del(k)
				delete(want, k)
			} else {
				next.Set(k, round)
				want[k] = round
			}
		}
		versions = append(versions, version{next, maps.Clone(want)})
		cur = next
	}
	for i, v := range versions {
		got := maps.Collect(v.m.All())
		if !maps.Equal(got, v.want) || v.m.Len() != len(v.want) {
			t.Fatalf("version %d: %d keys (len %d), want %d, equal %v", i, len(got), v.m.Len(), len(v.want), maps.Equal(got, v.want))
		}
		for k, val := range v.want {
			if g, ok := v.m.Lookup(k); !ok || g != val || v.m.Get(k) != val {
				t.Fatalf("version %d: %s = %d %v, want %d", i, k, g, ok, val)
			}
		}
		if _, ok := v.m.Lookup("absent"); ok {
			t.Fatalf("version %d: absent key found", i)
		}
	}
}

// TestMapCloneCopiesOnlyWrittenShards: a one-key write to a clone of a
// large map leaves every other shard shared.
func TestMapCloneCopiesOnlyWrittenShards(t *testing.T) {
	m := &Map[int, int]{}
	for i := range 10000 {
		m.Set(i, i)
	}
	c := m.Clone()
	c.Set(5, -5)
	shared := 0
	for i := range Shards {
		if len(m.shards[i]) > 0 && sameMap(m.shards[i], c.shards[i]) {
			shared++
		}
	}
	if shared != Shards-1 {
		t.Errorf("%d of %d shards shared after a one-key write, want %d", shared, Shards, Shards-1)
	}
	if m.Get(5) != 5 || c.Get(5) != -5 {
		t.Errorf("original 5 = %d, clone 5 = %d", m.Get(5), c.Get(5))
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

// TestNewIsWritable: a Map from New takes writes as the zero value does,
// and a clone of it still copies a shard before writing.
func TestNewIsWritable(t *testing.T) {
	m := New[int, int](1000)
	for i := range 1000 {
		m.Set(i, i)
	}
	c := m.Clone()
	c.Set(1, -1)
	c.Del(2)
	if m.Len() != 1000 || m.Get(1) != 1 || m.Get(2) != 2 {
		t.Errorf("the original changed: len %d, 1 = %d, 2 = %d", m.Len(), m.Get(1), m.Get(2))
	}
	if _, ok := c.Lookup(2); c.Len() != 999 || c.Get(1) != -1 || ok {
		t.Errorf("the clone: len %d, 1 = %d, 2 present %v", c.Len(), c.Get(1), ok)
	}
}
