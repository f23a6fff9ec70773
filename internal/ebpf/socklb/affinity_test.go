package socklb

import (
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/model"
)

// TestAffinity: with ClientIP affinity a client's connects keep the backend
// of its first; a backend that leaves the set is replaced (and kept); an
// entry older than the timeout is chosen afresh (made old here by writing
// its time, so the test waits for nothing). Held reports the timeout.
func TestAffinity(t *testing.T) {
	h := newHarness(t)
	h.serveTCP(t, be1, "be1")
	h.serveTCP(t, be2, "be2")
	both := []netip.AddrPort{mustAP(be1), mustAP(be2)}
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Affinity: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	as := h.dial(t, "tcp", vip, 20)
	first := as[0].Server
	for i, a := range as {
		if a.Server != first || a.Peer != vip {
			t.Fatalf("connect %d with affinity: %+v, want %s (as the first) as %s", i, a, first, vip)
		}
	}

	// The client's backend leaves: the other one, then kept.
	other, rest := "be2", []netip.AddrPort{mustAP(be2)}
	if first == "be2" {
		other, rest = "be1", []netip.AddrPort{mustAP(be1)}
	}
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, rest, Policy{Affinity: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Affinity: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if a := h.dial(t, "tcp", vip, 1)[0]; a.Server != first {
		t.Fatalf("the backend set back to both: %+v, want %s still (its entry was never used meanwhile)", a, first)
	}
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, rest, Policy{Affinity: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if a := h.dial(t, "tcp", vip, 1)[0]; a.Server != other {
		t.Fatalf("the client's backend gone: %+v, want %s", a, other)
	}
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Affinity: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i, a := range h.dial(t, "tcp", vip, 10) {
		if a.Server != other {
			t.Fatalf("connect %d after the switch: %+v, want %s kept", i, a, other)
		}
	}

	// Expired before every connect: a fresh random choice each time. (The
	// kernel's clock counts from boot: a 1s timeout is past for time 0.)
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Affinity: time.Second}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for range connects {
		expireAffinity(t, h.lb)
		seen[h.dial(t, "tcp", vip, 1)[0].Server]++
	}
	if seen["be1"] == 0 || seen["be2"] == 0 {
		t.Fatalf("%d connects, each after its entry expired: %v, want both backends", connects, seen)
	}

	// Last seen by another CPU whose clock reads ahead of this one's (a
	// minute here, so that no connect comes after it): the entry is fresh,
	// and every connect keeps its backend (an unsigned "now - last seen"
	// would make it ages old).
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Affinity: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	first = h.dial(t, "tcp", vip, 1)[0].Server
	var now unix.Timespec
	for i := range connects {
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
			t.Fatal(err)
		}
		setAffinitySeen(t, h.lb, uint64(now.Nano()+time.Minute.Nanoseconds()))
		if a := h.dial(t, "tcp", vip, 1)[0]; a.Server != first {
			t.Fatalf("connect %d after its entry was seen a minute ahead of this clock: %+v, want %s kept", i, a, first)
		}
	}

	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Affinity: time.Second}); err != nil {
		t.Fatal(err)
	}
	held, err := h.lb.Held()
	if err != nil || len(held) != 1 || held[0].Policy.Affinity != time.Second {
		t.Fatalf("Held = %+v, %v; want the frontend with a 1s affinity", held, err)
	}
	if err := h.lb.SetServicePolicy(mustAP(vip), model.ProtocolTCP, both, Policy{Affinity: 86401 * time.Second}); err == nil {
		t.Fatal("an affinity over a day was accepted")
	}
}

// expireAffinity makes every affinity entry older than any timeout.
func expireAffinity(t *testing.T, lb *LB) {
	t.Helper()
	setAffinitySeen(t, lb, 0)
}

// setAffinitySeen sets every affinity entry's last use to lastNs, a
// reading of the kernel's monotonic clock.
func setAffinitySeen(t *testing.T, lb *LB, lastNs uint64) {
	t.Helper()
	var (
		k socklbAffinityKey
		v socklbAffinityValue
	)
	var keys []socklbAffinityKey
	var vals []socklbAffinityValue
	it := lb.objs.Affinity.Iterate()
	for it.Next(&k, &v) {
		keys, vals = append(keys, k), append(vals, v)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		vals[i].LastNs = lastNs
		if err := lb.objs.Affinity.Put(&keys[i], &vals[i]); err != nil {
			t.Fatal(err)
		}
	}
}
