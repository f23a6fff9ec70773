package ipam

import (
	"errors"
	"net/netip"
	"testing"
)

func addrs(ss ...string) map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	for _, s := range ss {
		m[netip.MustParseAddr(s)] = true
	}
	return m
}

func TestNextOrder(t *testing.T) {
	v4 := netip.MustParsePrefix("192.168.1.0/29") // .2-.6 usable
	v6 := netip.MustParsePrefix("fd00:192:168:1::/64")
	none := netip.Addr{}
	for _, c := range []struct {
		name   string
		subnet netip.Prefix
		last   netip.Addr
		used   map[netip.Addr]bool
		want   string
	}{
		{"first skips network and gateway", v4, none, nil, "192.168.1.2"},
		{"after last reserved", v4, netip.MustParseAddr("192.168.1.3"), nil, "192.168.1.4"},
		{"round robin skips used", v4, netip.MustParseAddr("192.168.1.3"), addrs("192.168.1.4", "192.168.1.5"), "192.168.1.6"},
		{"wraps before broadcast", v4, netip.MustParseAddr("192.168.1.6"), nil, "192.168.1.2"},
		{"wraps past used", v4, netip.MustParseAddr("192.168.1.5"), addrs("192.168.1.6", "192.168.1.2"), "192.168.1.3"},
		{"last outside subnet restarts", v4, netip.MustParseAddr("10.0.0.9"), nil, "192.168.1.2"},
		{"last is the gateway", v4, netip.MustParseAddr("192.168.1.1"), nil, "192.168.1.2"},
		{"only one left", v4, none, addrs("192.168.1.2", "192.168.1.3", "192.168.1.5", "192.168.1.6"), "192.168.1.4"},
		{"ipv6 first", v6, none, nil, "fd00:192:168:1::2"},
		{"ipv6 after last", v6, netip.MustParseAddr("fd00:192:168:1::ff"), addrs("fd00:192:168:1::100"), "fd00:192:168:1::101"},
		{"ipv6 wraps at the last address (no broadcast)", v6, netip.MustParseAddr("fd00:192:168:1:ffff:ffff:ffff:fffe"), nil, "fd00:192:168:1:ffff:ffff:ffff:ffff"},
		{"ipv6 wraps", v6, netip.MustParseAddr("fd00:192:168:1:ffff:ffff:ffff:ffff"), nil, "fd00:192:168:1::2"},
		{"unmasked subnet", netip.MustParsePrefix("192.168.1.77/24"), none, nil, "192.168.1.2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Next(c.subnet, c.last, c.used)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != c.want {
				t.Fatalf("Next = %s, want %s", got, c.want)
			}
		})
	}
}

func TestNextExhausted(t *testing.T) {
	v4 := netip.MustParsePrefix("192.168.1.0/29")
	used := addrs("192.168.1.2", "192.168.1.3", "192.168.1.4", "192.168.1.5", "192.168.1.6",
		"192.168.1.1", "10.0.0.1") // the gateway and foreign addresses do not count
	_, err := Next(v4, netip.Addr{}, used)
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("err = %v, want ErrExhausted", err)
	}
	if want := "subnet 192.168.1.0/29: no free address (5 addresses, all allocated)"; err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
	if _, err := Next(netip.MustParsePrefix("192.168.1.0/31"), netip.Addr{}, nil); !errors.Is(err, ErrExhausted) {
		t.Fatalf("/31: err = %v, want ErrExhausted", err)
	}
}

func TestSizeAndBounds(t *testing.T) {
	for _, c := range []struct {
		subnet      string
		size        string
		first, last string
		gw          string
	}{
		{"192.168.1.0/24", "253", "192.168.1.2", "192.168.1.254", "192.168.1.1"},
		{"192.168.1.0/29", "5", "192.168.1.2", "192.168.1.6", "192.168.1.1"},
		{"192.168.1.0/30", "1", "192.168.1.2", "192.168.1.2", "192.168.1.1"},
		{"10.0.0.0/12", "1048573", "10.0.0.2", "10.15.255.254", "10.0.0.1"},
		{"fd00:192:168:1::/64", "18446744073709551614", "fd00:192:168:1::2", "fd00:192:168:1:ffff:ffff:ffff:ffff", "fd00:192:168:1::1"},
		{"fd00::/126", "2", "fd00::2", "fd00::3", "fd00::1"},
	} {
		p := netip.MustParsePrefix(c.subnet)
		if got := Size(p).String(); got != c.size {
			t.Errorf("Size(%s) = %s, want %s", p, got, c.size)
		}
		if got := firstUsable(p).String(); got != c.first {
			t.Errorf("first(%s) = %s, want %s", p, got, c.first)
		}
		if got := lastUsable(p).String(); got != c.last {
			t.Errorf("last(%s) = %s, want %s", p, got, c.last)
		}
		if got := Gateway(p).String(); got != c.gw {
			t.Errorf("Gateway(%s) = %s, want %s", p, got, c.gw)
		}
		if Usable(p, Gateway(p)) || Usable(p, p.Addr()) || !Usable(p, firstUsable(p)) || Usable(p, lastAddr(p)) == p.Addr().Is4() {
			t.Errorf("Usable(%s) wrong at the edges", p)
		}
	}
}
