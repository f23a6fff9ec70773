package socklb

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/svcnet/svcnet/internal/model"
)

// IPv6 addresses inside the test's namespace: the backends and the plain
// server are added to its lo; the frontends exist on no interface (the
// namespace has no IPv6 route beyond lo's, so they are unreachable).
const (
	vip6   = "[fd00:96::10]:80"
	empty6 = "[fd00:96::11]:80"
	be61   = "[fd00:1::2]:8080"
	be62   = "[fd00:1::3]:8080"
	plain6 = "[fd00:1::4]:8080"
)

func TestConnectTranslatesIPv6(t *testing.T) {
	h := newHarness(t)
	for _, a := range []string{"fd00:1::2/128", "fd00:1::3/128", "fd00:1::4/128"} {
		h.addLoopback(t, a)
	}
	h.serveTCP(t, be61, "be1")
	h.serveTCP(t, be62, "be2")
	h.serveTCP(t, plain6, "plain")
	if err := h.lb.SetService(mustAP(vip6), model.ProtocolTCP, []netip.AddrPort{mustAP(be61), mustAP(be62)}); err != nil {
		t.Fatal(err)
	}
	if err := h.lb.SetService(mustAP(empty6), model.ProtocolTCP, nil); err != nil {
		t.Fatal(err)
	}

	seen := map[string]int{}
	for i, a := range h.dial(t, "tcp", vip6, connects) {
		if a.Errno != "" || a.Err != "" || !a.Echo || a.Peer != vip6 {
			t.Fatalf("connect %d to %s: %+v, want an echo from a backend and peer %s", i, vip6, a, vip6)
		}
		seen[a.Server]++
	}
	if seen["be1"] == 0 || seen["be2"] == 0 || len(seen) != 2 {
		t.Errorf("servers reached in %d connects: %v, want both backends and nothing else", connects, seen)
	}
	if a := h.dial(t, "tcp", empty6, 1)[0]; a.Errno != "ECONNREFUSED" {
		t.Errorf("connect to an IPv6 frontend without backends: %+v, want ECONNREFUSED", a)
	}
	if a := h.dial(t, "tcp", plain6, 1)[0]; a.Server != "plain" || a.Peer != plain6 {
		t.Errorf("connect to %s: %+v, want the plain server itself", plain6, a)
	}
	if peer, err := h.dialOutside(t, vip6); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("connect from outside the cgroup: peer %q, err %v; want ENETUNREACH", peer, err)
	}
	if err := h.lb.DeleteService(mustAP(vip6), model.ProtocolTCP); err != nil {
		t.Fatal(err)
	}
	if a := h.dial(t, "tcp", vip6, 1)[0]; a.Errno != "ENETUNREACH" {
		t.Errorf("connect after DeleteService: %+v, want ENETUNREACH (untranslated)", a)
	}
}

// A dual-stack IPv6 socket that dials an IPv4 frontend's IPv4-mapped address
// goes through connect6 and reaches an IPv4 backend.
func TestConnectDualStackSocket(t *testing.T) {
	h := newHarness(t)
	h.serveTCP(t, be1, "be1")
	h.serveTCP(t, be2, "be2")
	if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, []netip.AddrPort{mustAP(be1), mustAP(be2)}); err != nil {
		t.Fatal(err)
	}
	mapped := netip.AddrPortFrom(netip.AddrFrom16(mustAP(vip).Addr().As16()), mustAP(vip).Port()).String()
	seen := map[string]int{}
	for i, a := range h.dial(t, "tcp", mapped, connects) {
		if a.Errno != "" || a.Err != "" || !a.Echo || a.Peer != mapped {
			t.Fatalf("connect %d to %s: %+v, want an echo from a backend and peer %s", i, mapped, a, mapped)
		}
		seen[a.Server]++
	}
	if seen["be1"] == 0 || seen["be2"] == 0 || len(seen) != 2 {
		t.Errorf("servers reached in %d connects: %v, want both backends", connects, seen)
	}
}
