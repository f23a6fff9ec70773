package bpfaddr

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/model"
)

func TestProtoNumber(t *testing.T) {
	for p, want := range map[model.Protocol]uint8{model.ProtocolTCP: 6, model.ProtocolUDP: 17, model.ProtocolSCTP: 132} {
		if got, err := ProtoNumber(p); err != nil || got != want {
			t.Errorf("ProtoNumber(%s) = %d, %v; want %d", p, got, err, want)
		}
	}
	if _, err := ProtoNumber("ICMP"); err == nil {
		t.Error("ProtoNumber(ICMP): no error")
	}
}

func TestCheckFrontend(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, c := range []struct {
		name     string
		frontend netip.AddrPort
		backends []netip.AddrPort
		ok       bool
	}{
		{"ipv4 with backends", ap("10.96.0.1:443"), []netip.AddrPort{ap("192.168.1.2:6443")}, true},
		{"no backends", ap("10.96.0.1:443"), nil, true},
		{"zero frontend", netip.AddrPort{}, nil, false},
		{"ipv6 with backends", ap("[fd00:96::1]:443"), []netip.AddrPort{ap("[fd00::2]:443")}, true},
		{"ipv4-mapped frontend", ap("[::ffff:10.96.0.1]:443"), nil, false},
		{"ipv4-mapped backend", ap("10.96.0.1:443"), []netip.AddrPort{ap("[::ffff:192.168.1.2]:443")}, false},
		{"ipv4 backend of ipv6", ap("[fd00:96::1]:443"), []netip.AddrPort{ap("192.168.1.2:443")}, false},
		{"port 0", ap("10.96.0.1:0"), nil, false},
		{"ipv6 backend", ap("10.96.0.1:443"), []netip.AddrPort{ap("[fd00::2]:443")}, false},
		{"backend port 0", ap("10.96.0.1:443"), []netip.AddrPort{ap("192.168.1.2:0")}, false},
	} {
		if err := CheckFrontend(c.frontend, c.backends); (err == nil) != c.ok {
			t.Errorf("%s: CheckFrontend = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, s := range []string{"10.96.0.10", "fd00:96::a", "0.0.0.0", "::"} {
		a := netip.MustParseAddr(s)
		if got := Addr(AddrWords(a)); got != a {
			t.Errorf("Addr(AddrWords(%v)) = %v", a, got)
		}
	}
	for _, p := range []uint16{0, 1, 80, 0x1234, 65535} {
		if got := Port(PortWord(p)); got != p {
			t.Errorf("Port(PortWord(%d)) = %d", p, got)
		}
	}
	for _, n := range []uint8{ProtoTCP, ProtoUDP, ProtoSCTP} {
		p, err := Protocol(n)
		if err != nil {
			t.Fatal(err)
		}
		if back, _ := ProtoNumber(p); back != n {
			t.Errorf("ProtoNumber(Protocol(%d)) = %d", n, back)
		}
	}
	if _, err := Protocol(1); err == nil {
		t.Error("Protocol(1): no error")
	}
}
