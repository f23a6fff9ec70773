package socklb

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/model"
)

// Addresses inside the test's namespace: the frontend exists on no
// interface (the namespace has only lo, so it is unreachable untranslated);
// the backends and the plain server are loopback addresses of the namespace.
const (
	vip      = "10.96.0.10:80"
	vipUDP   = "10.96.0.10:53"
	empty    = "10.96.0.11:80"
	be1      = "127.0.0.2:8080"
	be2      = "127.0.0.3:8080"
	plain    = "127.0.0.4:8080"
	connects = 64 // P(one backend never chosen) = 2^-63
)

func mustAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestConnectTranslates(t *testing.T) {
	h := newHarness(t)
	h.serveTCP(t, be1, "be1")
	h.serveTCP(t, be2, "be2")
	h.serveTCP(t, plain, "plain")
	if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, []netip.AddrPort{mustAP(be1), mustAP(be2)}); err != nil {
		t.Fatal(err)
	}

	seen := map[string]int{}
	for i, a := range h.dial(t, "tcp", vip, connects) {
		if a.Errno != "" || a.Err != "" || !a.Echo {
			t.Fatalf("connect %d to %s: %+v, want an echo from a backend", i, vip, a)
		}
		if a.Peer != vip {
			t.Errorf("connect %d: getpeername = %s, want the frontend %s", i, a.Peer, vip)
		}
		seen[a.Server]++
	}
	if seen["be1"] == 0 || seen["be2"] == 0 || len(seen) != 2 {
		t.Errorf("servers reached in %d connects: %v, want both backends and nothing else", connects, seen)
	}

	// A destination that is no frontend is untouched, as is the frontend's
	// address on another port.
	if a := h.dial(t, "tcp", plain, 1)[0]; a.Server != "plain" || a.Peer != plain || !a.Echo {
		t.Errorf("connect to %s: %+v, want the plain server itself", plain, a)
	}
	if a := h.dial(t, "tcp", "10.96.0.10:81", 1)[0]; a.Errno != "ENETUNREACH" {
		t.Errorf("connect to the frontend address on another port: %+v, want ENETUNREACH (untranslated)", a)
	}
	// The frontend is TCP only: a UDP socket to it is untouched.
	if a := h.dial(t, "udp", vip, 1)[0]; a.Errno != "ENETUNREACH" {
		t.Errorf("UDP connect to a TCP frontend: %+v, want ENETUNREACH (untranslated)", a)
	}

	// A process outside the cgroup is not translated.
	if peer, err := h.dialOutside(t, vip); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("connect from outside the cgroup: peer %q, err %v; want ENETUNREACH", peer, err)
	}

	// Deleting the Service restores plain behaviour.
	if err := h.lb.DeleteService(mustAP(vip), model.ProtocolTCP); err != nil {
		t.Fatal(err)
	}
	if a := h.dial(t, "tcp", vip, 1)[0]; a.Errno != "ENETUNREACH" {
		t.Errorf("connect after DeleteService: %+v, want ENETUNREACH (untranslated)", a)
	}
	if err := h.lb.DeleteService(mustAP(vip), model.ProtocolTCP); err != nil {
		t.Errorf("second DeleteService: %v, want nil", err)
	}
}

func TestConnectNoBackendsRefuses(t *testing.T) {
	h := newHarness(t)
	if err := h.lb.SetService(mustAP(empty), model.ProtocolTCP, nil); err != nil {
		t.Fatal(err)
	}
	for i, a := range h.dial(t, "tcp", empty, 3) {
		if a.Errno != "ECONNREFUSED" {
			t.Errorf("connect %d to a frontend without backends: %+v, want ECONNREFUSED", i, a)
		}
		// connect itself fails, before any packet: far below any timeout.
		if a.Micros > 500_000 {
			t.Errorf("connect %d took %d µs to be refused, want at once", i, a.Micros)
		}
	}
}

func TestSetServiceReplacesBackends(t *testing.T) {
	h := newHarness(t)
	h.serveTCP(t, be1, "be1")
	h.serveTCP(t, be2, "be2")
	steps := []struct {
		backends []string
		want     string
	}{{[]string{be1}, "be1"}, {[]string{be2}, "be2"}, {[]string{be1}, "be1"}}
	for _, s := range steps {
		var bes []netip.AddrPort
		for _, b := range s.backends {
			bes = append(bes, mustAP(b))
		}
		if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, bes); err != nil {
			t.Fatal(err)
		}
		for i, a := range h.dial(t, "tcp", vip, 8) {
			if a.Server != s.want || a.Peer != vip {
				t.Fatalf("backends %v, connect %d: %+v, want %s with peer %s", s.backends, i, a, s.want, vip)
			}
		}
	}
	// The two replaced sets stay in the map until Reap deletes them.
	if n := backendSlots(t, h.lb); n != 3 {
		t.Errorf("backend slots after 3 changes, before Reap: %d, want 3", n)
	}
	if err := h.lb.Reap(); err != nil {
		t.Fatal(err)
	}
	if n := backendSlots(t, h.lb); n != 1 {
		t.Errorf("backend slots after Reap: %d, want 1", n)
	}
	if a := h.dial(t, "tcp", vip, 1)[0]; a.Server != "be1" {
		t.Errorf("connect after Reap: %+v, want be1", a)
	}
}

// backendSlots counts the entries of the backends map and checks that the
// slot allocator holds the same number.
func backendSlots(t *testing.T, lb *LB) int {
	t.Helper()
	n := 0
	var k uint32
	var v socklbBackend
	it := lb.objs.Backends.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	held := 0
	for _, c := range lb.slots.live {
		held += int(c)
	}
	if held != n {
		t.Errorf("slot allocator holds %d slots, the backends map %d", held, n)
	}
	return n
}

// TestConnectUDPLeftAlone: a UDP socket's connect is not translated, even
// to a frontend (its datagrams are left to the rules, here none: the
// frontend is unroutable), while an unconnected socket's datagram to the
// same frontend is (sendmsg).
func TestConnectUDPLeftAlone(t *testing.T) {
	h := newHarness(t)
	h.serveUDP(t, "127.0.0.2:5353", "be1")
	if err := h.lb.SetService(mustAP(vipUDP), model.ProtocolUDP, []netip.AddrPort{mustAP("127.0.0.2:5353")}); err != nil {
		t.Fatal(err)
	}
	if a := h.dial(t, "udp", vipUDP, 1)[0]; a.Errno != "ENETUNREACH" {
		t.Fatalf("UDP connect to %s: %+v, want it untranslated (ENETUNREACH)", vipUDP, a)
	}
	if a := cgrouptest.SendTo(t, h.ns, h.cgfd, vipUDP, 1)[0]; a.Server != "be1" || a.Peer != vipUDP {
		t.Fatalf("UDP sendto %s: %+v, want be1 answering as %s", vipUDP, a, vipUDP)
	}
}

// With the backends map full of retired slots, SetService reaps them and
// succeeds.
func TestSetServiceReapsFullMap(t *testing.T) {
	h := newHarness(t)
	const half = 262144 / 2 // BACKEND_MAX in bpf/socklb.c
	bes := make([]netip.AddrPort, half)
	for i := range bes {
		bes[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), uint16(1+i>>16))
	}
	// The third finds the map full (one set live, one retired), reaps the
	// retired one and retires the second.
	for i := range 3 {
		if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, bes); err != nil {
			t.Fatalf("SetService %d of %d backends: %v", i+1, half, err)
		}
	}
	if n := backendSlots(t, h.lb); n != 2*half {
		t.Errorf("backend slots: %d, want %d (one set live, one retired)", n, 2*half)
	}
	if err := h.lb.Reap(); err != nil {
		t.Fatal(err)
	}
	if n := backendSlots(t, h.lb); n != half {
		t.Errorf("backend slots after Reap: %d, want %d", n, half)
	}
}
