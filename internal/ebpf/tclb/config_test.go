package tclb

import (
	"net/netip"
	"testing"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
)

func TestNodeConfig(t *testing.T) {
	nc, err := nodeConfig(Config{
		SNAT:     []netip.Addr{netip.MustParseAddr("172.26.236.177"), netip.MustParseAddr("fd00:26:236::177")},
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.1.7/16"), netip.MustParsePrefix("fd00:192:168::/56")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  [4]uint32
		want string
	}{
		{"snat4", nc.Snat4, "::ffff:172.26.236.177"},
		{"snat6", nc.Snat6, "fd00:26:236::177"},
		{"pods4", nc.Pods4, "::ffff:192.168.0.0"},
		{"pods4 mask", nc.Pods4Mask, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:0"},
		{"pods6", nc.Pods6, "fd00:192:168::"},
		{"pods6 mask", nc.Pods6Mask, "ffff:ffff:ffff:ff00::"},
	} {
		if want := bpfaddr.AddrWords(netip.MustParseAddr(c.want)); c.got != want {
			t.Errorf("%s = %v, want %s", c.name, bpfaddr.Addr(c.got), c.want)
		}
	}
	for _, bad := range []Config{
		{SNAT: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}},
		{SNAT: []netip.Addr{netip.MustParseAddr("::ffff:10.0.0.1")}},
		{SNAT: []netip.Addr{netip.IPv4Unspecified()}},
		{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16")}},
		{PodCIDRs: []netip.Prefix{{}}},
	} {
		if _, err := nodeConfig(bad); err == nil {
			t.Errorf("nodeConfig(%+v): no error", bad)
		}
	}
}
