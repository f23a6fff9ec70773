package controlplane

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func TestIPRangeBounds(t *testing.T) {
	tests := []struct {
		cidr               string
		first, last, upper string
		size, offset       uint64
	}{
		// min(max(16, size/16), 256): the default range keeps 256 static addresses.
		{"10.96.0.0/12", "10.96.0.1", "10.111.255.254", "10.96.1.1", 1<<20 - 2, 256},
		{"10.0.0.0/24", "10.0.0.1", "10.0.0.254", "10.0.0.17", 254, 16},
		{"10.0.0.0/27", "10.0.0.1", "10.0.0.30", "10.0.0.17", 30, 16},
		// 16 addresses or fewer: no static band.
		{"10.0.0.0/28", "10.0.0.1", "10.0.0.14", "10.0.0.1", 14, 0},
		{"10.0.0.0/30", "10.0.0.1", "10.0.0.2", "10.0.0.1", 2, 0},
		// IPv6 has no broadcast address: the last address is usable.
		{"fd00:96::/108", "fd00:96::1", "fd00:96::f:ffff", "fd00:96::101", 1<<20 - 1, 256},
		{"fd00::/64", "fd00::1", "fd00::ffff:ffff:ffff:ffff", "fd00::101", 1<<64 - 1, 256},
	}
	for _, tc := range tests {
		t.Run(tc.cidr, func(t *testing.T) {
			r := newIPRange(mustPrefix(tc.cidr))
			got := fmt.Sprintln(r.first, r.last, r.upper, r.size, r.offset)
			want := fmt.Sprintln(tc.first, tc.last, tc.upper, tc.size, tc.offset)
			if got != want {
				t.Errorf("first last upper size offset = %s, want %s", got, want)
			}
			for _, a := range []netip.Addr{r.prefix.Addr(), r.last.Next()} {
				if r.contains(a) {
					t.Errorf("contains(%s) = true for the network or broadcast address", a)
				}
			}
		})
	}
}

// TestIPRangeUpperBandFirst fills a /24 dynamically: the 238 addresses of the upper
// band go first, then the 16 of the lower band, then the range is full.
func TestIPRangeUpperBandFirst(t *testing.T) {
	r := newIPRange(mustPrefix("10.0.0.0/24"))
	for i := 0; i < 254; i++ {
		a, err := r.next(fmt.Sprint("svc", i), fmt.Sprint("owner", i))
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		inLower := a.Compare(r.upper) < 0
		if inLower != (i >= 238) {
			t.Fatalf("allocation %d got %s: lower band used while the upper band had room, or the reverse", i, a)
		}
	}
	if _, err := r.next("one-more", "x"); !errors.Is(err, ErrRangeFull) {
		t.Errorf("allocation in a full range: err = %v, want ErrRangeFull", err)
	}
}

func TestIPRangeClaim(t *testing.T) {
	r := newIPRange(mustPrefix("10.96.0.0/12"))
	if isNew, err := r.claim(mustAddr("10.96.0.10"), "a"); err != nil || !isNew {
		t.Fatalf("first claim: new=%v err=%v", isNew, err)
	}
	if isNew, err := r.claim(mustAddr("10.96.0.10"), "a"); err != nil || isNew {
		t.Errorf("claim by the holder again: new=%v err=%v, want false nil", isNew, err)
	}
	if _, err := r.claim(mustAddr("10.96.0.10"), "b"); err == nil || err.Error() != "provided IP is already allocated" {
		t.Errorf("claim by another: %v", err)
	}
	_, err := r.claim(mustAddr("10.96.0.0"), "b")
	want := "the provided IP (10.96.0.0) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
	if err == nil || err.Error() != want {
		t.Errorf("claim of the network address: %v, want %s", err, want)
	}
	r.release(mustAddr("10.96.0.10"), "b") // not the holder: no effect
	if _, err := r.claim(mustAddr("10.96.0.10"), "b"); err == nil {
		t.Errorf("release by a non-holder freed the address")
	}
	r.release(mustAddr("10.96.0.10"), "a")
	if _, err := r.claim(mustAddr("10.96.0.10"), "b"); err != nil {
		t.Errorf("claim after release: %v", err)
	}
}

func TestIPRangeHugeIPv6(t *testing.T) {
	r := newIPRange(mustPrefix("fd00::/64"))
	seen := map[netip.Addr]bool{}
	for i := 0; i < 100; i++ {
		a, err := r.next(fmt.Sprint(i), fmt.Sprint(i))
		if err != nil || seen[a] || !r.contains(a) || a.Compare(r.upper) < 0 {
			t.Fatalf("allocation %d: %s %v (dup %v)", i, a, err, seen[a])
		}
		seen[a] = true
	}
}

func TestAddrAdd(t *testing.T) {
	tests := []struct {
		a    string
		n    uint64
		want string
	}{
		{"10.0.0.255", 1, "10.0.1.0"},
		{"255.255.255.255", 1, "0.0.0.0"},
		{"fd00::ffff:ffff:ffff:ffff", 1, "fd00:0:0:1::"},
		{"fd00::", 1<<64 - 1, "fd00::ffff:ffff:ffff:ffff"},
	}
	for _, tc := range tests {
		if got := addrAdd(mustAddr(tc.a), tc.n); got.String() != tc.want {
			t.Errorf("%s + %d = %s, want %s", tc.a, tc.n, got, tc.want)
		}
	}
}

func TestPortRange(t *testing.T) {
	p := newPortRange(PortRange{30000, 32767})
	if p.offset != 86 {
		t.Errorf("static band of 30000-32767 = %d ports, want 86 (2768/32)", p.offset)
	}
	if got := newPortRange(PortRange{30000, 30015}).offset; got != 0 {
		t.Errorf("static band of 16 ports = %d, want 0", got)
	}
	if got := newPortRange(PortRange{1, 65535}).offset; got != 128 {
		t.Errorf("static band of 65535 ports = %d, want 128", got)
	}
	_, err := p.claim(29999, "a")
	if want := "provided port is not in the valid range. The range of valid ports is 30000-32767"; err == nil || err.Error() != want {
		t.Errorf("claim out of range: %v, want %s", err, want)
	}
	small := newPortRange(PortRange{30000, 30031}) // 32 ports, 16 static
	for i := 0; i < 32; i++ {
		port, err := small.next(fmt.Sprint(i), fmt.Sprint(i))
		if err != nil {
			t.Fatalf("port %d: %v", i, err)
		}
		if (port < 30016) != (i >= 16) {
			t.Fatalf("allocation %d got %d: static band used before the dynamic one was full", i, port)
		}
	}
	if _, err := small.next("x", "x"); !errors.Is(err, ErrRangeFull) {
		t.Errorf("full port range: err = %v", err)
	}
}
