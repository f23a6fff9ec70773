package socklb

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
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

// TestLeastConn: each connect goes to the backend with the fewest open
// sockets of the frontend, so open connections split exactly evenly; once
// the sockets close (sock_release) the counts and the reverse entries are
// gone.
func TestLeastConn(t *testing.T) {
	h := newHarness(t)
	h.serveTCP(t, be1, "be1")
	h.serveTCP(t, be2, "be2")
	both := []netip.AddrPort{mustAP(be1), mustAP(be2)}
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Scheduler: LeastConn}); err != nil {
		t.Fatal(err)
	}
	count := func(hs ...*cgrouptest.Holder) map[string]int {
		c := map[string]int{}
		for _, h := range hs {
			for _, a := range h.Attempts {
				if a.Peer != vip || a.Err != "" {
					t.Fatalf("held connect: %+v, want one translated as %s", a, vip)
				}
				c[a.Server]++
			}
		}
		return c
	}
	a := cgrouptest.Hold(t, h.ns, h.cgfd, vip, 4)
	if c := count(a); c["be1"] != 2 || c["be2"] != 2 {
		t.Fatalf("4 connections held: %v, want 2 and 2", c)
	}
	b := cgrouptest.Hold(t, h.ns, h.cgfd, vip, 6)
	if c := count(a, b); c["be1"] != 5 || c["be2"] != 5 {
		t.Fatalf("10 connections held: %v, want 5 and 5", c)
	}
	if got := lcCounts(t, h.lb); got != [2]uint64{5, 5} {
		t.Fatalf("lc_conns holds %v, want 5 and 5", got)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if got := lcCounts(t, h.lb); got != [2]uint64{0, 0} {
		t.Fatalf("lc_conns after every socket closed: %v, want 0 and 0", got)
	}
	if n := entries(t, h.lb.objs.Revnat); n != 0 {
		t.Fatalf("revnat holds %d entries after every socket closed, want none", n)
	}
}

// lcCounts returns lc_conns' counts of be1 and be2 (any frontend).
func lcCounts(t *testing.T, lb *LB) [2]uint64 {
	t.Helper()
	var (
		k   socklbLcKey
		v   uint64
		out [2]uint64
	)
	it := lb.objs.LcConns.Iterate()
	for it.Next(&k, &v) {
		switch backendAddrPort(k.Backend) {
		case mustAP(be1):
			out[0] += v
		case mustAP(be2):
			out[1] += v
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// entries counts a map's entries.
func entries(t *testing.T, m *ebpf.Map) int {
	t.Helper()
	n := 0
	it := m.Iterate()
	var k, v []byte
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConnectAgainAfterRefused: a socket whose translated connect was
// refused and that connects again is translated afresh, its record of the
// first translation replaced: getpeername reports the frontend for the
// backend it reached, and revnat holds one entry per socket while they are
// open and none after. Round robin over a refusing backend (no server at
// be2) and a serving one sends every socket through a refused connect or
// after one.
func TestConnectAgainAfterRefused(t *testing.T) {
	h := newHarness(t)
	h.serveTCP(t, be1, "be1")
	bes := []netip.AddrPort{mustAP(be2), mustAP(be1)}
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, bes, Policy{Scheduler: RoundRobin}); err != nil {
		t.Fatal(err)
	}
	const n = 4
	held := cgrouptest.HoldRetry(t, h.ns, h.cgfd, vip, n, 2)
	for i, a := range held.Attempts {
		if a.Err != "" || a.Server != "be1" || a.Peer != vip {
			t.Fatalf("socket %d: %+v, want be1 reached and reported as %s", i, a, vip)
		}
	}
	if got := entries(t, h.lb.objs.Revnat); got != n {
		t.Fatalf("revnat holds %d entries for %d open sockets, want one each", got, n)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, h.lb.objs.Revnat); got != 0 {
		t.Fatalf("revnat holds %d entries after every socket closed, want none", got)
	}
}
