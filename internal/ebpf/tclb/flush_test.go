package tclb

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestFlushConnsInBatches: with more UDP flows than one batch read holds,
// removing a backend deletes exactly the frontend's flows to it and their
// SNAT entries, across every batch; flows to the backend that stays, and
// another frontend's flows to the removed backend, stay. A change that
// removes no backend (one added, the same set again) deletes nothing.
func TestFlushConnsInBatches(t *testing.T) {
	netnstest.RequireRoot(t)
	lb, err := Open(Config{}, TCX)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	front, other := ap(nodeIP4, nodePort), ap(nodeIP4, nodePort+1)
	a, b, c := Backend{ap(remoteIP4, beNode), false}, Backend{ap("10.2.0.3", beNode), false}, Backend{ap("10.2.0.4", beNode), false}
	for _, fe := range []netip.AddrPort{front, other} {
		if err := lb.SetService(fe, model.ProtocolUDP, []Backend{a, b}, Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	const perBackend = 3 * connBatch // several batches' worth
	put := func(fe, be netip.AddrPort, n, base int) { putUDPFlows(t, lb, fe, be, n, base) }
	put(front, a.AddrPort, perBackend, 0)
	put(front, b.AddrPort, perBackend, perBackend)
	put(other, a.AddrPort, 1000, 2*perBackend)
	count := func() (conns, revs int) {
		t.Helper()
		var k tclbConnKey
		var v tclbConnValue
		it := lb.objs.Conns.Iterate()
		for it.Next(&k, &v) {
			conns++
		}
		var rv tclbRevValue
		rit := lb.objs.Revnat.Iterate()
		for rit.Next(&k, &rv) {
			revs++
		}
		if it.Err() != nil || rit.Err() != nil {
			t.Fatal(it.Err(), rit.Err())
		}
		return conns, revs
	}
	all := 2*perBackend + 1000
	for _, set := range [][]Backend{{a, b, c}, {a, b, c}} {
		if err := lb.SetService(front, model.ProtocolUDP, set, Policy{}); err != nil {
			t.Fatal(err)
		}
		if n, r := count(); n != all || r != all {
			t.Fatalf("no backend removed: %d flows and %d SNAT entries, want all %d", n, r, all)
		}
	}
	if err := lb.SetService(front, model.ProtocolUDP, []Backend{b, c}, Policy{}); err != nil {
		t.Fatal(err)
	}
	if n, r := count(); n != perBackend+1000 || r != perBackend+1000 {
		t.Fatalf("backend %v removed: %d flows and %d SNAT entries left, want %d (the frontend's to the other backend, another frontend's)", a.AddrPort, n, r, perBackend+1000)
	}
}

// putUDPFlows writes n UDP flows from distinct clients (numbered from
// base) to frontend fe, each held by backend be through a SNAT entry, as
// the programs would.
func putUDPFlows(t testing.TB, lb *LB, fe, be netip.AddrPort, n, base int) {
	t.Helper()
	sk, err := svcKey(fe, model.ProtocolUDP)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		c := base + i
		client := netip.AddrFrom4([4]byte{172, byte(31 + c>>16), byte(c >> 8), byte(c)})
		k := tclbConnKey{Saddr: bpfaddr.AddrWords(client), Daddr: sk.Addr, Sport: bpfaddr.PortWord(40000), Dport: sk.Port, Proto: sk.Proto}
		rev := tclbConnKey{Saddr: bpfaddr.AddrWords(be.Addr()), Daddr: bpfaddr.AddrWords(client),
			Sport: bpfaddr.PortWord(be.Port()), Dport: bpfaddr.PortWord(40000), Proto: sk.Proto}
		v := tclbConnValue{Rev: rev, Backend: bpfaddr.AddrWords(be.Addr()), BackendPort: bpfaddr.PortWord(be.Port())}
		if err := lb.objs.Conns.Put(k, v); err != nil {
			t.Fatal(err)
		}
		if err := lb.objs.Revnat.Put(rev, tclbRevValue{Fwd: k}); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkSetServiceUDP times a UDP frontend's backend change with
// 100,000 flows of another frontend in the table: one backend replaced by
// another (the flows of the removed one are looked for, reading the whole
// table), and the same backends again (nothing removed, the table not
// read).
func BenchmarkSetServiceUDP(b *testing.B) {
	netnstest.RequireRoot(b)
	lb, err := Open(Config{}, TCX)
	if err != nil {
		b.Fatal(err)
	}
	defer lb.Close()
	front, other := ap(nodeIP4, nodePort), ap(nodeIP4, nodePort+1)
	x, y := Backend{ap(remoteIP4, beNode), false}, Backend{ap("10.2.0.3", beNode), false}
	putUDPFlows(b, lb, other, x.AddrPort, 100000, 0)
	for _, c := range []struct {
		name string
		sets [2][]Backend
	}{{"replace", [2][]Backend{{x}, {y}}}, {"same", [2][]Backend{{x, y}, {x, y}}}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if err := lb.SetService(front, model.ProtocolUDP, c.sets[i%2], Policy{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
