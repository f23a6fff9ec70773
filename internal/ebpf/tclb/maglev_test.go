package tclb

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestMaglevSameOnEveryNode: two load balancers (two nodes) with the same
// backends under Maglev send every new flow to the same backend, and the
// flows reach every backend; at random they would not agree. A backend
// removed moves its own flows and few others.
func TestMaglevSameOnEveryNode(t *testing.T) {
	netnstest.RequireRoot(t)
	front := ap(nodeIP4, nodePort)
	bes := []Backend{{ap("10.1.0.2", beNode), true}, {ap("10.1.0.3", beNode), true}, {ap("10.1.0.4", beNode), true}}
	var lbs [2]*LB
	for i := range lbs {
		lb, err := Open(Config{}, TCX)
		if err != nil {
			t.Fatal(err)
		}
		defer lb.Close()
		if err := lb.SetService(front, model.ProtocolTCP, bes, Policy{Maglev: true}); err != nil {
			t.Fatal(err)
		}
		if _, pol, ok, err := readService(lb.objs.Services, lb.objs.Backends, mustKey(t, front)); err != nil || !ok || !pol.Maglev {
			t.Fatalf("services entry: %+v, %v, %v; want Maglev", pol, ok, err)
		}
		lbs[i] = lb
	}
	const flows = 200
	choose := func(lb *LB, sport int) netip.AddrPort {
		ret, out := runProg(t, lb.objs.TclbIngress, packet(t, model.ProtocolTCP, ap(clientIP4, sport), front, true, false), 1)
		d := decode(t, out)
		if ret != actOK {
			t.Fatalf("flow from port %d: verdict %d, want 0", sport, ret)
		}
		return d.dst
	}
	first := map[int]netip.AddrPort{}
	seen := map[netip.AddrPort]int{}
	for sport := 20000; sport < 20000+flows; sport++ {
		a, b := choose(lbs[0], sport), choose(lbs[1], sport)
		if a != b {
			t.Fatalf("flow from port %d: node A chose %v, node B %v; want the same", sport, a, b)
		}
		first[sport] = a
		seen[a]++
	}
	if len(seen) != len(bes) {
		t.Errorf("%d flows reached %v, want all %d backends", flows, seen, len(bes))
	}

	// Remove the last backend on node A; new flows (new source ports whose
	// hash is the same as before but for the port) are compared with the
	// first round's choice by recomputing on node B, which keeps all three.
	if err := lbs[0].SetService(front, model.ProtocolTCP, bes[:2], Policy{Maglev: true}); err != nil {
		t.Fatal(err)
	}
	moved, own := 0, 0
	for sport := 30000; sport < 30000+flows; sport++ {
		before, after := choose(lbs[1], sport), choose(lbs[0], sport)
		if before == bes[2].AddrPort {
			own++
			continue
		}
		if before != after {
			moved++
		}
	}
	t.Logf("after removing 1 of 3 backends: %d of %d flows of the removed backend moved (must), %d of the others moved", own, flows, moved)
	if moved > flows/10 {
		t.Errorf("%d of %d flows of the remaining backends moved, want few (Maglev)", moved, flows-own)
	}

	// At random, two nodes disagree.
	for i := range lbs {
		if err := lbs[i].SetService(front, model.ProtocolTCP, bes, Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	agree := 0
	for sport := 40000; sport < 40000+64; sport++ {
		if choose(lbs[0], sport) == choose(lbs[1], sport) {
			agree++
		}
	}
	if agree == 64 {
		t.Error("at random, two nodes agreed on 64 flows of 64: the Maglev check above proves nothing")
	}
}

func mustKey(t *testing.T, front netip.AddrPort) tclbSvcKey {
	t.Helper()
	k, err := svcKey(front, model.ProtocolTCP)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestMaglevPickPredictsProgram: for flows of both families and of TCP and
// UDP, the backend the ingress program sends a new connection to is the
// one MaglevTable.Pick computes (what the tracer tells), and
// FlowHash matches flow_hash word for word.
func TestMaglevPickPredictsProgram(t *testing.T) {
	netnstest.RequireRoot(t)
	lb, err := Open(Config{}, TCX)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	for _, c := range []struct {
		client, front string
		bes           []string
	}{
		{clientIP4, nodeIP4, []string{"10.1.0.2", "10.1.0.3", "10.1.0.4", "10.1.0.5", "10.1.0.6"}},
		{clientIP6, nodeIP6, []string{"fd31::2", "fd31::3", "fd31::4"}},
	} {
		for _, proto := range []model.Protocol{model.ProtocolTCP, model.ProtocolUDP} {
			front := ap(c.front, nodePort)
			var bes []Backend
			var aps []netip.AddrPort
			for _, b := range c.bes {
				bes = append(bes, Backend{ap(b, beNode), true})
				aps = append(aps, ap(b, beNode))
			}
			if err := lb.SetService(front, proto, bes, Policy{Maglev: true}); err != nil {
				t.Fatal(err)
			}
			table, err := NewMaglevTable(aps)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int]bool{}
			for sport := 41000; sport < 41100; sport++ {
				client := ap(c.client, sport)
				want, _, err := table.Pick(client, front, proto)
				if err != nil {
					t.Fatal(err)
				}
				ret, out := runProg(t, lb.objs.TclbIngress, packet(t, proto, client, front, true, false), 1)
				if got := decode(t, out).dst; ret != actOK || got != aps[want] {
					t.Fatalf("%s %v → %v: the program sent it to %v (verdict %d), the prediction is %v", proto, client, front, got, ret, aps[want])
				}
				seen[want] = true
			}
			if len(seen) != len(aps) {
				t.Errorf("%s %s: 100 flows reached %d of %d backends", proto, c.front, len(seen), len(aps))
			}
		}
	}
}

// TestMaglevTableSlots: every slot names a backend and the shares are
// even (Maglev's ⌊M/N⌋ or ⌈M/N⌉).
func TestMaglevTableSlots(t *testing.T) {
	aps := []netip.AddrPort{ap("10.1.0.2", 80), ap("10.1.0.3", 80), ap("10.1.0.4", 80)}
	table, err := NewMaglevTable(aps)
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != MaglevSize {
		t.Fatalf("table of %d slots, want %d", len(table), MaglevSize)
	}
	total := 0
	for i, n := range table.Slots(len(aps)) {
		if n < MaglevSize/3 || n > MaglevSize/3+1 {
			t.Errorf("backend %d holds %d slots, want %d or %d", i, n, MaglevSize/3, MaglevSize/3+1)
		}
		total += n
	}
	if total != MaglevSize {
		t.Errorf("slots add up to %d, want %d", total, MaglevSize)
	}
}
