package userspace

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"
)

var (
	epA = netip.MustParseAddrPort("10.0.0.1:80")
	epB = netip.MustParseAddrPort("10.0.0.2:80")
	epC = netip.MustParseAddrPort("10.0.0.3:80")

	client1 = netip.MustParseAddr("192.0.2.1")
	client2 = netip.MustParseAddr("192.0.2.2")
)

func mustPick(t *testing.T, b *balancer, client netip.Addr, tried ...netip.AddrPort) netip.AddrPort {
	t.Helper()
	ep, ok := b.pick(client, tried)
	if !ok {
		t.Fatalf("pick(%v, tried %v): no endpoint", client, tried)
	}
	return ep
}

func TestRoundRobinTurnsAndSkipsTried(t *testing.T) {
	b := newBalancer(RoundRobin)
	b.set([]netip.AddrPort{epC, epA, epB}, 0) // taken sorted
	var got []netip.AddrPort
	for range 6 {
		got = append(got, mustPick(t, b, client1))
	}
	want := []netip.AddrPort{epA, epB, epC, epA, epB, epC}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("picks = %v, want %v", got, want)
		}
	}
	// The turn is at epA; with epA tried, epB comes next.
	if ep := mustPick(t, b, client1, epA); ep != epB {
		t.Errorf("pick with epA tried = %v, want %v", ep, epB)
	}
	if ep, ok := b.pick(client1, []netip.AddrPort{epA, epB, epC}); ok {
		t.Errorf("pick with every endpoint tried = %v, want none", ep)
	}
	// A new set keeps the turn after the endpoint last taken (epB).
	b.set([]netip.AddrPort{epA, epB}, 0)
	if ep := mustPick(t, b, client1); ep != epA {
		t.Errorf("after set, pick = %v, want %v", ep, epA)
	}
	b.set(nil, 0)
	if ep, ok := b.pick(client1, nil); ok || !b.empty() {
		t.Errorf("empty set picked %v", ep)
	}
}

func TestRemovedEndpointNeverPicked(t *testing.T) {
	b := newBalancer(LeastConnections)
	b.set([]netip.AddrPort{epA, epB, epC}, time.Hour)
	b.connected(client1, epB) // client1 pinned to epB, which then leaves
	b.set([]netip.AddrPort{epA, epC}, time.Hour)
	for range 10 {
		if ep := mustPick(t, b, client1); ep == epB {
			t.Fatal("picked removed endpoint")
		}
	}
	// Its open connection still counts until it ends.
	if n := b.activeCount(epB); n != 1 {
		t.Errorf("active(epB) = %d, want 1", n)
	}
	b.released(epB)
	if n := b.activeCount(epB); n != 0 {
		t.Errorf("active(epB) after release = %d, want 0", n)
	}
}

func TestLeastConnectionsPicksFewest(t *testing.T) {
	b := newBalancer(LeastConnections)
	b.set([]netip.AddrPort{epA, epB, epC}, 0)
	// All equal: round robin order breaks the tie.
	for _, want := range []netip.AddrPort{epA, epB, epC} {
		ep := mustPick(t, b, client1)
		if ep != want {
			t.Fatalf("pick = %v, want %v", ep, want)
		}
		b.connected(client1, ep)
	}
	b.released(epB)
	for range 3 {
		if ep := mustPick(t, b, client1); ep != epB {
			t.Fatalf("pick = %v, want %v (the only one with no connection)", ep, epB)
		}
	}
	b.connected(client1, epB)
	b.connected(client1, epB)
	b.released(epA)
	if ep := mustPick(t, b, client1, epA); ep != epC {
		t.Errorf("pick with epA tried = %v, want %v (1 connection against 2)", ep, epC)
	}
}

func TestAffinityStickinessAndExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, sel := range []Selection{RoundRobin, LeastConnections} {
			b := newBalancer(sel)
			b.set([]netip.AddrPort{epA, epB, epC}, 10*time.Second)
			first := mustPick(t, b, client1)
			b.connected(client1, first)
			for i := range 3 {
				time.Sleep(9 * time.Second)
				if ep := mustPick(t, b, client1); ep != first {
					t.Fatalf("%v: pick %d after 9s = %v, want %v (affinity)", sel, i, ep, first)
				}
				b.connected(client1, first) // each connection refreshes the entry
			}
			// Another client is not pinned by client1's entry.
			if ep := mustPick(t, b, client2); ep == first {
				t.Errorf("%v: client2 got client1's endpoint %v", sel, ep)
			}
			time.Sleep(10 * time.Second)
			if ep := mustPick(t, b, client1); ep == first {
				t.Errorf("%v: pick after the timeout = %v, want another endpoint", sel, ep)
			}
			// A failed connect unpins the client.
			b.connected(client1, epC)
			b.failed(client1, epC)
			if ep := mustPick(t, b, client1, epC); ep == epC {
				t.Errorf("%v: picked the tried endpoint", sel)
			}
			// Timeout 0: no affinity.
			b.set([]netip.AddrPort{epA, epB, epC}, 0)
			b.connected(client1, epA)
			if len(b.affinity) != 0 {
				t.Errorf("%v: affinity recorded without a timeout", sel)
			}
		}
	})
}

// Expired entries are swept, so the map holds only the clients of one
// affinity timeout.
func TestAffinitySweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBalancer(RoundRobin)
		b.set([]netip.AddrPort{epA}, time.Second)
		for i := range 100 {
			c := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
			b.connected(c, mustPick(t, b, c))
		}
		time.Sleep(2 * time.Second)
		for range affinitySweep {
			mustPick(t, b, netip.Addr{})
		}
		if n := len(b.affinity); n != 0 {
			t.Errorf("%d expired affinity entries left after a sweep", n)
		}
	})
}
