package cni_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/svcnet/svcnet/internal/cni"
)

// The conflist of a dual-stack node, byte for byte: the fields in a fixed
// order, the plugin's defaults left out, and what libcni reads back from it.
func TestConfListDualStack(t *testing.T) {
	b, err := cni.ConfList(cni.ListOptions{
		CNIVersion: "1.0.0",
		Subnets:    []netip.Prefix{netip.MustParsePrefix(podCIDR4), netip.MustParsePrefix(podCIDR6)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "cniVersion": "1.0.0",
  "name": "svcnet",
  "plugins": [
    {
      "type": "svcnet",
      "subnets": [
        "192.168.1.0/24",
        "fd00:192:168:1::/64"
      ],
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
`
	if string(b) != want {
		t.Fatalf("conflist:\n%s\nwant:\n%s", b, want)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if list.Name != "svcnet" || list.CNIVersion != "1.0.0" || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "svcnet" ||
		!list.Plugins[0].Network.Capabilities["portMappings"] {
		t.Errorf("libcni reads %+v, plugin %+v", list, list.Plugins[0].Network)
	}
}

// Every field the lab sets, and the same options give the same bytes.
func TestConfListFields(t *testing.T) {
	o := cni.ListOptions{CNIVersion: "1.1.0", Name: "podnet", Bridge: "br-pods", MTU: 1400,
		Subnets: []netip.Prefix{netip.MustParsePrefix(podCIDR6)}, DataDir: "/run/x/ipam"}
	a, err := cni.ConfList(o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := cni.ConfList(o)
	if string(a) != string(b) {
		t.Fatalf("two renderings differ:\n%s\n%s", a, b)
	}
	for _, want := range []string{`"cniVersion": "1.1.0"`, `"name": "podnet"`, `"bridge": "br-pods"`, `"mtu": 1400`, `"dataDir": "/run/x/ipam"`} {
		if !strings.Contains(string(a), want) {
			t.Errorf("conflist lacks %s:\n%s", want, a)
		}
	}
}

// What the plugin would refuse is refused here, with the plugin's reason.
func TestConfListRefuses(t *testing.T) {
	v4 := netip.MustParsePrefix(podCIDR4)
	for _, tc := range []struct {
		name string
		o    cni.ListOptions
		want string
	}{
		{"unknown version", cni.ListOptions{CNIVersion: "2.0.0", Subnets: []netip.Prefix{v4}}, `cniVersion "2.0.0"`},
		{"no version", cni.ListOptions{Subnets: []netip.Prefix{v4}}, `cniVersion ""`},
		{"no subnet", cni.ListOptions{CNIVersion: "1.0.0"}, "at least one subnet"},
		{"two IPv4", cni.ListOptions{CNIVersion: "1.0.0", Subnets: []netip.Prefix{v4, netip.MustParsePrefix("10.244.0.0/24")}}, "of one family"},
		{"host bits", cni.ListOptions{CNIVersion: "1.0.0", Subnets: []netip.Prefix{netip.MustParsePrefix("192.168.1.7/24")}}, "not a network address"},
		{"too small", cni.ListOptions{CNIVersion: "1.0.0", Subnets: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/31")}}, "too small"},
		{"bad name", cni.ListOptions{CNIVersion: "1.0.0", Name: "a/b", Subnets: []netip.Prefix{v4}}, `name "a/b"`},
		{"bad bridge", cni.ListOptions{CNIVersion: "1.0.0", Bridge: "a bridge", Subnets: []netip.Prefix{v4}}, "bridge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cni.ConfList(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
