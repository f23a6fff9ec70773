package socklb

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/cgrouptest"
	"github.com/svcnet/svcnet/internal/model"
)

// TestViewReadsAttached: a View opened on the cgroup the LB is attached to
// reads back what SetService and DeleteService programmed, in both
// families, and a cgroup with nothing attached has no socket load balancer.
func TestViewReadsAttached(t *testing.T) {
	h := newHarness(t)
	bes := []netip.AddrPort{mustAP(be1), mustAP(be2)}
	bes6 := []netip.AddrPort{mustAP("[fd00::2]:8080")}
	for _, s := range []struct {
		fe    string
		proto model.Protocol
		bes   []netip.AddrPort
	}{{vip, model.ProtocolTCP, bes}, {vipUDP, model.ProtocolUDP, bes[:1]}, {empty, model.ProtocolTCP, nil}, {"[fd00:96::10]:80", model.ProtocolTCP, bes6}} {
		if err := h.lb.SetService(mustAP(s.fe), s.proto, s.bes); err != nil {
			t.Fatal(err)
		}
	}
	v, err := OpenAttached(h.cg)
	if err != nil {
		t.Fatalf("OpenAttached(%s): %v", h.cg, err)
	}
	defer func() {
		if err := v.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	for _, tc := range []struct {
		fe    string
		proto model.Protocol
		found bool
		bes   []netip.AddrPort
	}{
		{vip, model.ProtocolTCP, true, bes},
		{vip, model.ProtocolUDP, false, nil},
		{vipUDP, model.ProtocolUDP, true, bes[:1]},
		{empty, model.ProtocolTCP, true, nil},
		{"[fd00:96::10]:80", model.ProtocolTCP, true, bes6},
		{"10.96.0.99:80", model.ProtocolTCP, false, nil},
	} {
		got, found, err := v.Lookup(mustAP(tc.fe), tc.proto)
		if err != nil || found != tc.found || !reflect.DeepEqual(got, tc.bes) {
			t.Errorf("Lookup(%s/%s) = %v, %v, %v; want %v, %v", tc.fe, tc.proto, got, found, err, tc.bes, tc.found)
		}
	}

	// A change is seen at once, through the same view.
	if err := h.lb.SetService(mustAP(vip), model.ProtocolTCP, bes[1:]); err != nil {
		t.Fatal(err)
	}
	if err := h.lb.DeleteService(mustAP(vipUDP), model.ProtocolUDP); err != nil {
		t.Fatal(err)
	}
	if err := h.lb.Reap(); err != nil {
		t.Fatal(err)
	}
	if got, found, err := v.Lookup(mustAP(vip), model.ProtocolTCP); err != nil || !found || !reflect.DeepEqual(got, bes[1:]) {
		t.Errorf("after the change, Lookup(%s) = %v, %v, %v; want %v", vip, got, found, err, bes[1:])
	}
	if got, found, err := v.Lookup(mustAP(vipUDP), model.ProtocolUDP); err != nil || found {
		t.Errorf("after the delete, Lookup(%s/udp) = %v, %v, %v; want none", vipUDP, got, found, err)
	}

	if _, err := OpenAttached(cgrouptest.New(t)); !errors.Is(err, ErrNotAttached) {
		t.Errorf("OpenAttached of a cgroup with nothing attached: %v, want ErrNotAttached", err)
	}
}
