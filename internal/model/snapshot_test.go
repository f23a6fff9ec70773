package model

import (
	"fmt"
	"slices"
	"testing"
)

// TestEachServiceIsServices: EachService yields what Services lists.
func TestEachServiceIsServices(t *testing.T) {
	s := NewStore()
	s.Update(func(tx *Txn) {
		for i := range 100 {
			tx.SetService(&Service{Namespace: fmt.Sprintf("ns%d", i%7), Name: fmt.Sprintf("s%d", i)})
		}
		tx.SetEndpointSlice(&EndpointSlice{Namespace: "ns0", Name: "orphan-1", Service: "orphan"})
	})
	snap := s.Snapshot()
	got := slices.Collect(snap.EachService())
	slices.SortFunc(got, func(a, b *ServiceState) int { return CompareServiceKeys(a.Service.Key(), b.Service.Key()) })
	if want := snap.Services(); !slices.Equal(got, want) {
		t.Errorf("EachService gave %d states, Services %d", len(got), len(want))
	}
}
