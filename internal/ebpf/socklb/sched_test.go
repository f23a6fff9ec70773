package socklb

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/model"
)

// TestSchedulers: round robin takes the backends in turn, exactly evenly;
// source hash keeps a client (the client processes share one network
// namespace) on one backend; an unknown scheduler is refused.
func TestSchedulers(t *testing.T) {
	h := newHarness(t)
	h.serveTCP(t, be1, "be1")
	h.serveTCP(t, be2, "be2")
	both := []netip.AddrPort{mustAP(be1), mustAP(be2)}

	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Scheduler: RoundRobin}); err != nil {
		t.Fatal(err)
	}
	as := h.dial(t, "tcp", vip, 10)
	for i, a := range as {
		if i > 0 && a.Server == as[i-1].Server {
			t.Fatalf("round robin: connects %d and %d both went to %s", i-1, i, a.Server)
		}
		if a.Peer != vip {
			t.Fatalf("round robin: connect %d: %+v, want peer %s", i, a, vip)
		}
	}

	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Scheduler: SourceHash}); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		as := h.dial(t, "tcp", vip, 8)
		for i, a := range as {
			if a.Server != as[0].Server {
				t.Fatalf("source hash, client %d: connect %d went to %s, the first to %s", round, i, a.Server, as[0].Server)
			}
		}
	}
	held, err := h.lb.Held()
	if err != nil || len(held) != 1 || held[0].Policy.Scheduler != SourceHash {
		t.Fatalf("Held = %+v, %v; want the frontend with source hash", held, err)
	}
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Scheduler: "wlc"}); err == nil {
		t.Fatal("scheduler wlc accepted")
	}
}
