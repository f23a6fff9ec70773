package cni

import (
	"regexp"
	"testing"
)

func TestHostVethName(t *testing.T) {
	n := HostVethName("0123456789abcdef", "eth0")
	if !regexp.MustCompile(`^veth[0-9a-f]{8}$`).MatchString(n) {
		t.Fatalf("name %q", n)
	}
	if HostVethName("0123456789abcdef", "eth0") != n {
		t.Fatal("not deterministic")
	}
	if HostVethName("0123456789abcdef", "eth1") == n || HostVethName("0123456789abcdee", "eth0") == n {
		t.Fatal("does not depend on both container ID and ifname")
	}
	// The separator keeps ("ab","c") and ("a","bc") apart.
	if HostVethName("ab", "c") == HostVethName("a", "bc") {
		t.Fatal("ambiguous concatenation")
	}
}

func TestAlias(t *testing.T) {
	a := Alias("svcnet", "cid-1.x", "eth0")
	if a != "svcnet svcnet cid-1.x eth0" {
		t.Fatalf("alias %q", a)
	}
	n, id, ifn, ok := ParseAlias(a)
	if !ok || n != "svcnet" || id != "cid-1.x" || ifn != "eth0" {
		t.Fatalf("ParseAlias = %q %q %q %v", n, id, ifn, ok)
	}
	for _, bad := range []string{"", "svcnet", "svcnet a b", "other a b c", "svcnet a b c d", "svcnet  b c"} {
		if _, _, _, ok := ParseAlias(bad); ok {
			t.Errorf("ParseAlias(%q) accepted", bad)
		}
	}
}
