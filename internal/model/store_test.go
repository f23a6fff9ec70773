package model

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/ipfamily"
)

func svc(ns, name, ip string) *Service {
	return &Service{Namespace: ns, Name: name, Type: ServiceTypeClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)},
		Ports: []ServicePort{{Name: "http", Protocol: ProtocolTCP, Port: 80, TargetPort: 8080}}}
}

func slice(ns, name, service string, addrs ...string) *EndpointSlice {
	sl := &EndpointSlice{Namespace: ns, Name: name, Service: service, AddressType: ipfamily.IPv4,
		Ports: []EndpointPort{{Name: "http", Protocol: ProtocolTCP, Port: 8080}}}
	for _, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, Endpoint{Addresses: []netip.Addr{netip.MustParseAddr(a)}, Ready: true, Serving: true})
	}
	return sl
}

// keys summarises a change list as "key:old->new" with "-" for nil and "+" for set.
func keys(c Changes) []string {
	var out []string
	for _, ch := range c.Services {
		out = append(out, ch.Key.String()+":"+mark(ch.Old != nil)+mark(ch.New != nil))
	}
	for _, ch := range c.Nodes {
		out = append(out, "node/"+ch.Name+":"+mark(ch.Old != nil)+mark(ch.New != nil))
	}
	for _, ch := range c.Pods {
		out = append(out, "pod/"+ch.Key.String()+":"+mark(ch.Old != nil)+mark(ch.New != nil))
	}
	return out
}

func mark(b bool) string {
	if b {
		return "+"
	}
	return "-"
}

func TestStoreChangesAndSnapshotsAreImmutable(t *testing.T) {
	st := NewStore()
	sub := st.Subscribe()
	defer sub.Close()
	if _, c := sub.Next(); !c.Empty() {
		t.Fatalf("empty store gave changes %v", keys(c))
	}

	st.Update(func(tx *Txn) {
		tx.SetService(svc("default", "web", "10.96.0.20"))
		tx.SetEndpointSlice(slice("default", "web-abc", "web", "192.168.1.2"))
		tx.SetNode(&Node{Name: "node1"})
		tx.SetSynced(true)
	})
	snap1, c := sub.Next()
	if got, want := keys(c), []string{"default/web:-+", "node/node1:-+"}; !cmp.Equal(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	if !snap1.Synced || snap1.Revision != 1 {
		t.Fatalf("snapshot synced=%v revision=%d, want true 1", snap1.Synced, snap1.Revision)
	}
	if n := len(snap1.Service(ServiceKey{"default", "web"}).Slices); n != 1 {
		t.Fatalf("web has %d slices, want 1", n)
	}

	// A second slice, then the Service's deletion: snap1 must not change.
	st.Update(func(tx *Txn) { tx.SetEndpointSlice(slice("default", "web-def", "web", "192.168.2.2")) })
	st.Update(func(tx *Txn) { tx.DeleteService(ServiceKey{"default", "web"}) })
	if n := len(snap1.Service(ServiceKey{"default", "web"}).Slices); n != 1 {
		t.Fatalf("published snapshot changed: web has %d slices, want 1", n)
	}
	snap3, c := sub.Next()
	// Merged: web existed at the previous Next and is gone now.
	if got, want := keys(c), []string{"default/web:+-"}; !cmp.Equal(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	if snap3.Service(ServiceKey{"default", "web"}) != nil {
		t.Fatal("deleted Service still visible")
	}
	if n := len(snap3.EndpointSlices()); n != 2 {
		t.Fatalf("%d slices kept, want 2 (slices outlive their Service until deleted)", n)
	}

	// The Service comes back: it arrives with the slices that waited for it.
	st.Update(func(tx *Txn) { tx.SetService(svc("default", "web", "10.96.0.20")) })
	_, c = sub.Next()
	if len(c.Services) != 1 || len(c.Services[0].New.Slices) != 2 {
		t.Fatalf("re-created Service: changes %v, want web with 2 slices", keys(c))
	}
}

func TestStoreNoOpUpdatesPublishNothing(t *testing.T) {
	st := NewStore()
	st.Update(func(tx *Txn) { tx.SetService(svc("a", "b", "10.96.0.2")) })
	rev := st.Snapshot().Revision
	sub := st.Subscribe()
	sub.Next()
	// Equal value, new pointer: no change, no new revision.
	st.Update(func(tx *Txn) { tx.SetService(svc("a", "b", "10.96.0.2")) })
	if st.Snapshot().Revision != rev {
		t.Fatalf("revision moved on a no-op update")
	}
	// Change and change back between two Next calls: merged away.
	st.Update(func(tx *Txn) { tx.SetService(svc("a", "b", "10.96.0.3")) })
	st.Update(func(tx *Txn) { tx.SetService(svc("a", "b", "10.96.0.2")) })
	if _, c := sub.Next(); !c.Empty() {
		t.Fatalf("round trip left changes %v", keys(c))
	}
	// Slices of an unknown Service are no visible change, but they are kept for
	// when the Service arrives in a later update.
	st.Update(func(tx *Txn) { tx.SetEndpointSlice(slice("a", "x-1", "x", "192.168.1.9")) })
	if _, c := sub.Next(); !c.Empty() {
		t.Fatalf("orphan slice produced changes %v", keys(c))
	}
	rev = st.Snapshot().Revision
	st.Update(func(tx *Txn) { tx.SetEndpointSlice(slice("a", "x-1", "x", "192.168.1.9")) })
	if st.Snapshot().Revision != rev {
		t.Fatal("revision moved when an identical slice was set again")
	}
	st.Update(func(tx *Txn) { tx.SetService(svc("a", "x", "10.96.0.9")) })
	_, c := sub.Next()
	if len(c.Services) != 1 || c.Services[0].New == nil || len(c.Services[0].New.Slices) != 1 {
		t.Fatalf("Service arriving after its slice: changes %v, want a/x with its slice", keys(c))
	}
	// Deleted in separate updates (Service first): no slice is left behind.
	st.Update(func(tx *Txn) { tx.DeleteService(ServiceKey{"a", "x"}) })
	st.Update(func(tx *Txn) { tx.DeleteEndpointSlice("a", "x-1") })
	if n := len(st.Snapshot().EndpointSlices()); n != 0 {
		t.Fatalf("%d slices left after Service and slice were deleted", n)
	}
}

func TestStoreSubscribeStartsWithFullState(t *testing.T) {
	st := NewStore()
	st.Update(func(tx *Txn) {
		tx.SetService(svc("b", "two", "10.96.0.3"))
		tx.SetService(svc("a", "one", "10.96.0.2"))
		tx.SetPod(&Pod{Namespace: "a", Name: "p"})
	})
	sub := st.Subscribe()
	select {
	case <-sub.C():
	default:
		t.Fatal("new subscription not signalled")
	}
	_, c := sub.Next()
	if got, want := keys(c), []string{"a/one:-+", "b/two:-+", "pod/a/p:-+"}; !cmp.Equal(got, want) {
		t.Fatalf("initial changes = %v, want %v (sorted)", got, want)
	}
}

func TestTxnReplace(t *testing.T) {
	st := NewStore()
	st.Update(func(tx *Txn) {
		tx.SetService(svc("ns", "keep", "10.96.0.2"))
		tx.SetService(svc("ns", "drop", "10.96.0.3"))
		tx.SetEndpointSlice(slice("ns", "drop-1", "drop", "192.168.1.1"))
		tx.SetNode(&Node{Name: "n1"})
		tx.SetPod(&Pod{Namespace: "ns", Name: "p1"})
	})
	sub := st.Subscribe()
	sub.Next()
	st.Update(func(tx *Txn) {
		tx.Replace([]*Service{svc("ns", "keep", "10.96.0.2"), svc("ns", "new", "10.96.0.4")},
			[]*EndpointSlice{slice("ns", "new-1", "new", "192.168.1.5")}, []*Node{{Name: "n2"}}, nil)
	})
	snap, c := sub.Next()
	want := []string{"ns/drop:+-", "ns/new:-+", "node/n1:+-", "node/n2:-+", "pod/ns/p1:+-"}
	if got := keys(c); !cmp.Equal(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	if n := len(snap.EndpointSlices()); n != 1 {
		t.Fatalf("%d slices after Replace, want 1", n)
	}
}

func TestEndpointsForDedupsAndSorts(t *testing.T) {
	a := slice("ns", "s-1", "s", "192.168.1.9", "192.168.1.2")
	b := slice("ns", "s-2", "s", "192.168.1.2", "192.168.1.3") // .2 moved between slices
	other := &EndpointSlice{Namespace: "ns", Name: "s-3", Service: "s", Ports: []EndpointPort{{Name: "dns", Protocol: ProtocolUDP, Port: 53}},
		Endpoints: []Endpoint{{Addresses: []netip.Addr{netip.MustParseAddr("192.168.1.1")}}}}
	got := EndpointsFor([]*EndpointSlice{a, b, other}, "http", ProtocolTCP)
	var addrs []string
	for _, e := range got {
		addrs = append(addrs, e.Addr.String())
		if e.Port != 8080 {
			t.Errorf("%s has port %d, want 8080", e.Addr, e.Port)
		}
	}
	if want := []string{"192.168.1.2", "192.168.1.3", "192.168.1.9"}; !cmp.Equal(addrs, want) {
		t.Fatalf("endpoints = %v, want %v", addrs, want)
	}
}

func TestSnapshotOf(t *testing.T) {
	a, b := svc("default", "a", "10.96.0.1"), svc("default", "b", "10.96.0.2")
	sl := slice("default", "a-1", "a", "192.168.1.10")
	snap := SnapshotOf([]*Service{a, b}, []*EndpointSlice{sl})
	if !snap.Synced {
		t.Error("not synced")
	}
	st := snap.Service(a.Key())
	if st == nil || st.Service != a || len(st.Slices) != 1 || st.Slices[0] != sl {
		t.Errorf("service a = %+v", st)
	}
	if st := snap.Service(b.Key()); st == nil || st.Service != b || len(st.Slices) != 0 {
		t.Errorf("service b = %+v", st)
	}
	if n := len(snap.Services()); n != 2 {
		t.Errorf("%d services, want 2", n)
	}
}
