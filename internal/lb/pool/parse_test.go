package pool

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcnet/svcnet/internal/lb/alloc"
)

func ipPool(name string, spec IPAddressPoolSpec) *IPAddressPool {
	return &IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func r(first, last string) alloc.Range {
	return alloc.Range{First: netip.MustParseAddr(first), Last: netip.MustParseAddr(last)}
}

func TestParseValid(t *testing.T) {
	no := false
	cases := []struct {
		name string
		in   *IPAddressPool
		want alloc.Pool
	}{{
		name: "defaults: l2, auto-assign, CIDR with network and broadcast",
		in:   ipPool("lab", IPAddressPoolSpec{Addresses: []string{"172.26.236.180/30"}}),
		want: alloc.Pool{Name: "lab", Mode: alloc.ModeL2, AutoAssign: true,
			Ranges: []alloc.Range{r("172.26.236.180", "172.26.236.183")}},
	}, {
		name: "ranges, IPv6 CIDR, single-address range, spaces",
		in: ipPool("mixed", IPAddressPoolSpec{Mode: "l2", AutoAssign: &no, Addresses: []string{
			"172.26.236.180-172.26.236.199", "fd00::/120", " 10.0.0.1 - 10.0.0.1 ", "fd00:1::/127", "10.1.0.0/32"}}),
		want: alloc.Pool{Name: "mixed", Mode: alloc.ModeL2, Ranges: []alloc.Range{
			r("172.26.236.180", "172.26.236.199"), r("fd00::", "fd00::ff"), r("10.0.0.1", "10.0.0.1"),
			r("fd00:1::", "fd00:1::1"), r("10.1.0.0", "10.1.0.0")}},
	}, {
		name: "node-ip with limits",
		in: ipPool("nodes", IPAddressPoolSpec{Mode: "node-ip", ServiceAllocation: &ServiceAllocation{
			Priority: 3, Namespaces: []string{"team-a"},
			NamespaceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "east"}}},
			ServiceSelectors: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold"}}}}},
		}}),
		want: alloc.Pool{Name: "nodes", Mode: alloc.ModeNodeIP, AutoAssign: true, Priority: 3,
			Namespaces:         []string{"team-a"},
			NamespaceSelectors: []labels.Selector{labels.SelectorFromSet(labels.Set{"zone": "east"})},
			ServiceSelectors:   []labels.Selector{mustSel(t, "tier in (gold)")}},
	}}
	selCmp := cmp.Comparer(func(a, b labels.Selector) bool { return a.String() == b.String() })
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.in.DeepCopy()
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d := cmp.Diff(tc.want, got, selCmp, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, tc.in); d != "" {
				t.Errorf("Parse modified its input:\n%s", d)
			}
		})
	}
}

func mustSel(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func TestParseInvalid(t *testing.T) {
	cases := []struct {
		name string
		in   *IPAddressPool
		want string // the whole message, or its start when it ends in "..."
	}{{
		name: "first after last",
		in:   ipPool("lab", IPAddressPoolSpec{Addresses: []string{"10.0.0.0/24", "172.26.236.199-172.26.236.180"}}),
		want: `IPAddressPool lab: spec.addresses[1]: "172.26.236.199-172.26.236.180": first address after last`,
	}, {
		name: "mixed-family range",
		in:   ipPool("lab", IPAddressPoolSpec{Addresses: []string{"10.0.0.1-fd00::1"}}),
		want: `IPAddressPool lab: spec.addresses[0]: "10.0.0.1-fd00::1": first and last address of different families`,
	}, {
		name: "bad CIDR, host bits, bare address, bad range address",
		in: ipPool("lab", IPAddressPoolSpec{Addresses: []string{
			"10.0.0.0/33", "172.26.236.181/30", "10.0.0.1", "10.0.0.x-10.0.0.9"}}),
		want: `IPAddressPool lab: spec.addresses[0]: "10.0.0.0/33": bad CIDR: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range; ` +
			`spec.addresses[1]: "172.26.236.181/30": not a network address (want 172.26.236.180/30); ` +
			`spec.addresses[2]: "10.0.0.1": want a CIDR (172.26.236.180/30) or a range (172.26.236.180-172.26.236.199); ` +
			`spec.addresses[3]: "10.0.0.x-10.0.0.9": bad address: ParseAddr("10.0.0.x"): unexpected character (at "x")`,
	}, {
		name: "overlapping with itself",
		in:   ipPool("lab", IPAddressPoolSpec{Addresses: []string{"172.26.236.180/30", "172.26.236.183-172.26.236.190"}}),
		want: `IPAddressPool lab: spec.addresses[1]: "172.26.236.183-172.26.236.190": overlaps spec.addresses[0] "172.26.236.180/30"`,
	}, {
		name: "node-ip with addresses",
		in:   ipPool("n", IPAddressPoolSpec{Mode: "node-ip", Addresses: []string{"10.0.0.0/30"}}),
		want: `IPAddressPool n: spec.addresses: must be empty in node-ip mode`,
	}, {
		name: "l2 without addresses",
		in:   ipPool("n", IPAddressPoolSpec{}),
		want: `IPAddressPool n: spec.addresses: required in l2 mode`,
	}, {
		name: "unknown mode, no name",
		in:   ipPool("", IPAddressPoolSpec{Mode: "bgp", Addresses: []string{"10.0.0.0/30"}}),
		want: `IPAddressPool : metadata.name: required; spec.mode: "bgp": unknown mode (want l2 or node-ip)`,
	}, {
		name: "bad limits",
		in: ipPool("lab", IPAddressPoolSpec{Addresses: []string{"10.0.0.0/30"}, ServiceAllocation: &ServiceAllocation{
			Priority:           -1,
			Namespaces:         []string{"Team_A"},
			NamespaceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"bad key!": "x"}}},
			ServiceSelectors: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: "Near"}}}},
		}}),
		want: `IPAddressPool lab: spec.serviceAllocation.priority: -1: must not be negative; spec.serviceAllocation.namespaces[0]: "Team_A": not a namespace name...`,
	}, {
		name: "unknown mode alone",
		in:   ipPool("x", IPAddressPoolSpec{Mode: "bgp"}),
		want: `IPAddressPool x: spec.mode: "bgp": unknown mode (want l2 or node-ip)`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.in)
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrOverlap) {
				t.Errorf("%v: wraps ErrInvalid %v, ErrOverlap %v", err, errors.Is(err, ErrInvalid), errors.Is(err, ErrOverlap))
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Pool != tc.in.Name {
				t.Errorf("%v: not an *Error for pool %q", err, tc.in.Name)
			}
			want, prefix := strings.CutSuffix(tc.want, "...")
			if got := err.Error(); got != want && !(prefix && strings.HasPrefix(got, want)) {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestParseBadSelectorsNamed(t *testing.T) {
	_, err := Parse(ipPool("lab", IPAddressPoolSpec{Addresses: []string{"10.0.0.0/30"}, ServiceAllocation: &ServiceAllocation{
		NamespaceSelectors: []metav1.LabelSelector{{}, {MatchLabels: map[string]string{"bad key!": "x"}}},
		ServiceSelectors: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: "Near"}}}},
	}}))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	for _, want := range []string{"spec.serviceAllocation.namespaceSelectors[1]: ", "spec.serviceAllocation.serviceSelectors[0]: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "namespaceSelectors[0]") {
		t.Errorf("%v: the empty selector (select all) is valid", err)
	}
}

func TestParseRangeLastOf(t *testing.T) {
	for in, want := range map[string]alloc.Range{
		"0.0.0.0/0":       r("0.0.0.0", "255.255.255.255"),
		"10.0.0.0/9":      r("10.0.0.0", "10.127.255.255"),
		"fd00::/64":       r("fd00::", "fd00::ffff:ffff:ffff:ffff"),
		"fd00:0:0:8::/61": r("fd00:0:0:8::", "fd00::f:ffff:ffff:ffff:ffff"),
		"::/0":            r("::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	} {
		got, err := ParseRange(in)
		if err != nil || got != want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
