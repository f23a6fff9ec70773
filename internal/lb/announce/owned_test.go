package announce

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestNormalize(t *testing.T) {
	in := append(addrs("172.26.236.181", "::ffff:172.26.236.180", "172.26.236.180", "fd00:26:236::b4%eth0", "fd00:26:236::b4"),
		netip.Addr{})
	in = append(in, addrs("0.0.0.0", "127.0.0.1", "224.0.0.1", "169.254.1.1", "255.255.255.255", "::", "::1", "ff02::1", "fe80::1")...)
	set, err := normalize(in)
	if diff := cmp.Diff(addrs("172.26.236.180", "172.26.236.181", "fd00:26:236::b4"), sortedSet(set), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("set (-want +got):\n%s", diff)
	}
	if !errors.Is(err, ErrInvalidIP) {
		t.Fatalf("error %v, want ErrInvalidIP", err)
	}
	// Each refused address is named.
	for _, s := range []string{"invalid IP", "0.0.0.0", "127.0.0.1", "224.0.0.1", "169.254.1.1", "255.255.255.255", "announce :::", "::1", "ff02::1", "fe80::1"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	if _, err := normalize(addrs("172.26.236.180")); err != nil {
		t.Errorf("valid list: %v", err)
	}
}

func TestDiff(t *testing.T) {
	set := func(ss ...string) map[netip.Addr]struct{} {
		m := map[netip.Addr]struct{}{}
		for _, ip := range addrs(ss...) {
			m[ip] = struct{}{}
		}
		return m
	}
	added, removed := diff(set("10.0.0.1", "10.0.0.2", "fd00::1"), set("10.0.0.2", "fd00::2", "10.0.0.3"))
	eq := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	if d := cmp.Diff(addrs("10.0.0.3", "fd00::2"), added, eq); d != "" {
		t.Errorf("added (-want +got):\n%s", d)
	}
	if d := cmp.Diff(addrs("10.0.0.1", "fd00::1"), removed, eq); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	if a, r := diff(nil, nil); a != nil || r != nil {
		t.Errorf("diff of empty sets = %v, %v", a, r)
	}
}
