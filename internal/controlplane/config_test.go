package controlplane

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePortRange(t *testing.T) {
	tests := []struct {
		in      string
		want    PortRange
		wantErr bool
	}{
		{"30000-32767", PortRange{30000, 32767}, false},
		{" 30000 - 32767 ", PortRange{30000, 32767}, false},
		{"30000+2767", PortRange{30000, 32767}, false},
		{"8080", PortRange{8080, 8080}, false},
		{"32767-30000", PortRange{}, true},
		{"0-100", PortRange{}, true},
		{"30000-70000", PortRange{}, true},
		{"65000+1000", PortRange{}, true},
		{"abc", PortRange{}, true},
		{"", PortRange{}, true},
	}
	for _, tc := range tests {
		got, err := ParsePortRange(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if r, _ := ParsePortRange("30000-32767"); r.String() != "30000-32767" {
		t.Errorf("String() = %s", r)
	}
}

func TestConfigDefaults(t *testing.T) {
	if diff := cmp.Diff(DefaultConfig(), Config{}.WithDefaults(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Config{}.WithDefaults() (-want +got):\n%s", diff)
	}
	c := Config{ServiceCIDRs: []netip.Prefix{mustPrefix("10.0.0.7/24")}}.WithDefaults()
	if c.ServiceCIDRs[0] != mustPrefix("10.0.0.0/24") || c.NodePortRange != DefaultNodePortRange {
		t.Errorf("WithDefaults kept %v %v, want the CIDR masked and the default port range", c.ServiceCIDRs, c.NodePortRange)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	p := mustPrefix
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"same family twice", Config{ServiceCIDRs: []netip.Prefix{p("10.0.0.0/24"), p("10.1.0.0/24")}, NodePortRange: DefaultNodePortRange},
			"invalid control plane config: service CIDRs 10.0.0.0/24 and 10.1.0.0/24 must be of different IP families"},
		{"three CIDRs", Config{ServiceCIDRs: []netip.Prefix{p("10.0.0.0/24"), p("fd00::/64"), p("10.1.0.0/24")}, NodePortRange: DefaultNodePortRange},
			"invalid control plane config: want one service CIDR or a dual-stack pair, got 3"},
		{"IPv6 too large", Config{ServiceCIDRs: []netip.Prefix{p("fd00::/48")}, NodePortRange: DefaultNodePortRange},
			"invalid control plane config: service CIDR fd00::/48: shortest allowed prefix length for service CIDR is 64, got 48"},
		{"IPv4 too small", Config{ServiceCIDRs: []netip.Prefix{p("10.0.0.0/31")}, NodePortRange: DefaultNodePortRange},
			"invalid control plane config: service CIDR 10.0.0.0/31: too small: no address to allocate"},
		{"ports reversed", Config{ServiceCIDRs: []netip.Prefix{p("10.0.0.0/24")}, NodePortRange: PortRange{32767, 30000}},
			"invalid control plane config: node port range 32767-30000: want 1 <= first <= last <= 65535"},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if err == nil || err.Error() != tc.want || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want %s", tc.name, err, tc.want)
		}
	}
}
