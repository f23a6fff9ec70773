package socklb

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/model"
)

// TestSendmsgUDP: datagrams from unconnected UDP sockets to a frontend go to
// its backends (sendmsg4/6), the answers read with recvfrom come from the
// frontend (recvmsg4/6), and a frontend without backends fails sendto with
// ECONNREFUSED; in both families.
func TestSendmsgUDP(t *testing.T) {
	h := newHarness(t)
	for _, a := range []string{"fd00:1::2/128", "fd00:1::3/128"} {
		h.addLoopback(t, a)
	}
	for _, fam := range []struct {
		vip, empty string
		bes        [2]string
	}{
		{"10.96.0.10:53", "10.96.0.11:53", [2]string{"127.0.0.2:5353", "127.0.0.3:5353"}},
		{"[fd00:96::10]:53", "[fd00:96::11]:53", [2]string{"[fd00:1::2]:5353", "[fd00:1::3]:5353"}},
	} {
		h.serveUDP(t, fam.bes[0], "be1")
		h.serveUDP(t, fam.bes[1], "be2")
		if err := h.lb.SetService(mustAP(fam.vip), model.ProtocolUDP, []netip.AddrPort{mustAP(fam.bes[0]), mustAP(fam.bes[1])}); err != nil {
			t.Fatal(err)
		}
		if err := h.lb.SetService(mustAP(fam.empty), model.ProtocolUDP, nil); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for i, a := range cgrouptest.SendTo(t, h.ns, h.cgfd, fam.vip, connects) {
			if a.Errno != "" || a.Err != "" || !a.Echo || a.Peer != fam.vip {
				t.Fatalf("datagram %d to %s: %+v, want an echo from a backend, received from %s", i, fam.vip, a, fam.vip)
			}
			seen[a.Server]++
		}
		if seen["be1"] == 0 || seen["be2"] == 0 || len(seen) != 2 {
			t.Errorf("servers reached by %d datagrams to %s: %v, want both backends", connects, fam.vip, seen)
		}
		if a := cgrouptest.SendTo(t, h.ns, h.cgfd, fam.empty, 1)[0]; a.Errno != "ECONNREFUSED" {
			t.Errorf("datagram to %s without backends: %+v, want ECONNREFUSED", fam.empty, a)
		}
	}
}
