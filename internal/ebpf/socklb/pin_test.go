package socklb

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/model"
)

// TestPinnedAdopt: a pinned load balancer keeps translating after its
// process closes it (an exit), the next one adopts its maps and links (Held
// reports what it left, changes and reaps work on the adopted slots), and
// Unpin detaches it.
func TestPinnedAdopt(t *testing.T) {
	h := newHarness(t) // an unpinned LB on the harness cgroup; closed first
	if err := h.lb.Close(); err != nil {
		t.Fatal(err)
	}
	root := cgrouptest.BPFFS(t)
	h.serveTCP(t, be1, "be1")
	h.serveTCP(t, be2, "be2")
	lb1, err := OpenPinned(h.cg, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		fe  string
		bes []netip.AddrPort
	}{{vip, []netip.AddrPort{mustAP(be1), mustAP(be2)}}, {empty, nil}} {
		if err := lb1.SetService(mustAP(s.fe), model.ProtocolTCP, s.bes); err != nil {
			t.Fatal(err)
		}
	}
	// A change retired a set that is never reaped: the next one adopts it
	// as retired.
	if err := lb1.SetService(mustAP(vip), model.ProtocolTCP, []netip.AddrPort{mustAP(be1), mustAP(be2)}); err != nil {
		t.Fatal(err)
	}
	if err := lb1.Close(); err != nil {
		t.Fatal(err)
	}
	if a := h.dial(t, "tcp", vip, 1)[0]; a.Peer != vip || a.Err != "" || a.Errno != "" {
		t.Fatalf("connect with the pinned load balancer closed: %+v, want it translated, peer %s", a, vip)
	}

	lb2, err := OpenPinned(h.cg, root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb2.Close() })
	held, err := lb2.Held()
	if err != nil {
		t.Fatal(err)
	}
	want := []Held{
		{Frontend: mustAP(vip), Protocol: model.ProtocolTCP, Backends: []netip.AddrPort{mustAP(be1), mustAP(be2)}, Policy: Policy{Scheduler: Random}},
		{Frontend: mustAP(empty), Protocol: model.ProtocolTCP, Policy: Policy{Scheduler: Random}},
	}
	if !reflect.DeepEqual(held, want) {
		t.Fatalf("adopted load balancer holds %+v, want %+v", held, want)
	}
	if n := backendSlots(t, lb2); n != 4 {
		t.Fatalf("adopted backend slots: %d, want 4 (2 live, 2 retired)", n)
	}
	if err := lb2.SetService(mustAP(vip), model.ProtocolTCP, []netip.AddrPort{mustAP(be2)}); err != nil {
		t.Fatal(err)
	}
	if err := lb2.Reap(); err != nil {
		t.Fatal(err)
	}
	if n := backendSlots(t, lb2); n != 1 {
		t.Fatalf("backend slots after a change and a reap: %d, want 1", n)
	}
	for i, a := range h.dial(t, "tcp", vip, 5) {
		if a.Server != "be2" || a.Peer != vip {
			t.Fatalf("connect %d after the adopted change: %+v, want be2 as %s", i, a, vip)
		}
	}

	if err := lb2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Unpin(root, h.cg); err != nil {
		t.Fatal(err)
	}
	if a := h.dial(t, "tcp", vip, 1)[0]; a.Errno != "ENETUNREACH" {
		t.Fatalf("connect after Unpin: %+v, want it untranslated (ENETUNREACH)", a)
	}
}
