package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEachLoadBalancer: after each of 300 random writes, EachLoadBalancer
// yields the Services of type LoadBalancer that Services lists, and an
// earlier snapshot still yields its own.
func TestEachLoadBalancer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []ServiceType{ServiceTypeClusterIP, ServiceTypeNodePort, ServiceTypeLoadBalancer}
	lbs := func(snap *Snapshot) (got, want []ServiceKey) {
		for st := range snap.EachLoadBalancer() {
			got = append(got, st.Service.Key())
		}
		slices.SortFunc(got, CompareServiceKeys)
		for _, st := range snap.Services() {
			if st.Service.Type == ServiceTypeLoadBalancer {
				want = append(want, st.Service.Key())
			}
		}
		return got, want
	}
	s := NewStore()
	type kept struct {
		snap *Snapshot
		want []ServiceKey
	}
	var earlier []kept
	for i := range 300 {
		s.Update(func(tx *Txn) {
			for range 1 + rng.IntN(3) {
				name := fmt.Sprintf("s%d", rng.IntN(20))
				switch rng.IntN(4) {
				case 0, 1:
					tx.SetService(&Service{Namespace: "ns", Name: name, Type: types[rng.IntN(len(types))]})
				case 2:
					tx.DeleteService(ServiceKey{"ns", name})
				case 3:
					if rng.IntN(2) == 0 {
						tx.SetEndpointSlice(&EndpointSlice{Namespace: "ns", Name: name + "-1", Service: name})
					} else {
						tx.DeleteEndpointSlice("ns", name+"-1")
					}
				}
			}
		})
		snap := s.Snapshot()
		got, want := lbs(snap)
		if !slices.Equal(got, want) {
			t.Fatalf("after write %d: EachLoadBalancer gave %v, want %v", i, got, want)
		}
		if i%50 == 0 {
			earlier = append(earlier, kept{snap, want})
		}
	}
	for _, k := range earlier {
		if got, _ := lbs(k.snap); !slices.Equal(got, k.want) {
			t.Errorf("snapshot %d changed: EachLoadBalancer gives %v, gave %v", k.snap.Revision, got, k.want)
		}
	}
}
