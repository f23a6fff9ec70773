package ipfamily

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSpellings(t *testing.T) {
	for _, c := range []struct {
		f     Family
		name  string
		proto uint8
		bits  int
		addr  string
	}{
		{IPv4, "IPv4", unix.AF_INET, 32, "10.96.0.1"},
		{IPv4, "IPv4", unix.AF_INET, 32, "::ffff:10.96.0.1"},
		{IPv6, "IPv6", unix.AF_INET6, 128, "fd00:96::1"},
	} {
		if got := c.f.String(); got != c.name {
			t.Errorf("%d.String() = %q, want %q", c.f, got, c.name)
		}
		if got, ok := Parse(c.name); !ok || got != c.f {
			t.Errorf("Parse(%q) = %v, %v", c.name, got, ok)
		}
		if got := c.f.Proto(); got != c.proto {
			t.Errorf("%v.Proto() = %d, want %d", c.f, got, c.proto)
		}
		if got, ok := FromProto(c.proto); !ok || got != c.f {
			t.Errorf("FromProto(%d) = %v, %v", c.proto, got, ok)
		}
		if got := c.f.Bits(); got != c.bits {
			t.Errorf("%v.Bits() = %d, want %d", c.f, got, c.bits)
		}
		if got := Of(netip.MustParseAddr(c.addr)); got != c.f {
			t.Errorf("Of(%s) = %v, want %v", c.addr, got, c.f)
		}
	}
	if _, ok := Parse("ipv4"); ok {
		t.Error(`Parse("ipv4") accepted a spelling Kubernetes does not use`)
	}
	if _, ok := FromProto(7); ok {
		t.Error("FromProto(7) accepted an unknown family")
	}
	if got := Family(0).String(); got != "family(0)" {
		t.Errorf("zero String() = %q", got)
	}
}
