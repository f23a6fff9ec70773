package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// parseProxy parses svcnet proxy's flags (after writing body to the
// --config file when body is not empty) and merges the configuration.
func parseProxy(t *testing.T, body string, args ...string) (*proxyOptions, proxy.Config, error) {
	t.Helper()
	if body != "" {
		p := filepath.Join(t.TempDir(), "proxy.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"--config", p}, args...)
	}
	o := &proxyOptions{}
	cmd := proxyCommand(o)
	if err := cmd.Flags().Parse(append([]string{"--hostname-override", "node1"}, args...)); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(cmd.Flags())
	return o, cfg, err
}

var pfx = netip.MustParsePrefix

// TestEgressMasqueradeSettings: on by default wherever a cluster CIDR is
// known; the Service CIDRs where svcnet knows them (--state, or the flag
// given); the --config section and the flags, which win over it.
func TestEgressMasqueradeSettings(t *testing.T) {
	dual := []netip.Prefix{pfx("192.168.0.0/16"), pfx("fd00:192:168::/56")}
	for _, tc := range []struct {
		name string
		body string
		args []string
		want servicetable.EgressMasquerade
	}{
		{"default: on with the cluster CIDRs", "", []string{"--kubeconfig", "k", "--cluster-cidr", "192.168.0.0/16,fd00:192:168::/56"},
			servicetable.EgressMasquerade{PodCIDRs: dual}},
		{"no cluster CIDR: nothing to masquerade", "", []string{"--kubeconfig", "k"}, servicetable.EgressMasquerade{}},
		{"cluster CIDR used in mode NodeCIDR too", "", []string{"--kubeconfig", "k", "--cluster-cidr", "10.244.0.0/16", "--detect-local-mode", "NodeCIDR"},
			servicetable.EgressMasquerade{PodCIDRs: []netip.Prefix{pfx("10.244.0.0/16")}}},
		{"--state: the embedded control plane's Service range", "", []string{"--state", "s", "--cluster-cidr", "192.168.0.0/16"},
			servicetable.EgressMasquerade{PodCIDRs: dual[:1], ServiceCIDRs: []netip.Prefix{pfx("10.96.0.0/12")}}},
		{"Service range given beside --kubeconfig", "", []string{"--kubeconfig", "k", "--cluster-cidr", "192.168.0.0/16", "--service-cluster-ip-range", "10.96.0.0/12,fd00:96::/108"},
			servicetable.EgressMasquerade{PodCIDRs: dual[:1], ServiceCIDRs: []netip.Prefix{pfx("10.96.0.0/12"), pfx("fd00:96::/108")}}},
		{"flags", "", []string{"--kubeconfig", "k", "--cluster-cidr", "192.168.0.0/16", "--non-masquerade-cidrs", "10.0.0.0/8,fd00:10::/64", "--masquerade-link-local"},
			servicetable.EgressMasquerade{PodCIDRs: dual[:1], NonMasqueradeCIDRs: []netip.Prefix{pfx("10.0.0.0/8"), pfx("fd00:10::/64")}, MasqueradeLinkLocal: true}},
		{"off by flag", "", []string{"--kubeconfig", "k", "--cluster-cidr", "192.168.0.0/16", "--egress-masquerade=false"}, servicetable.EgressMasquerade{}},
		{"the config file's section", "clusterCIDR: 192.168.0.0/16\negressMasquerade: {nonMasqueradeCIDRs: [172.26.236.0/24], masqLinkLocal: true}\n",
			[]string{"--kubeconfig", "k"},
			servicetable.EgressMasquerade{PodCIDRs: dual[:1], NonMasqueradeCIDRs: []netip.Prefix{pfx("172.26.236.0/24")}, MasqueradeLinkLocal: true}},
		{"off in the file", "clusterCIDR: 192.168.0.0/16\negressMasquerade: {enabled: false}\n",
			[]string{"--kubeconfig", "k"}, servicetable.EgressMasquerade{}},
		{"flags over the file", "clusterCIDR: 192.168.0.0/16\negressMasquerade: {enabled: false, nonMasqueradeCIDRs: [172.26.236.0/24], masqLinkLocal: true}\n",
			[]string{"--kubeconfig", "k", "--egress-masquerade", "--non-masquerade-cidrs", "10.0.0.0/8", "--masquerade-link-local=false"},
			servicetable.EgressMasquerade{PodCIDRs: dual[:1], NonMasqueradeCIDRs: []netip.Prefix{pfx("10.0.0.0/8")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, cfg, err := parseProxy(t, tc.body, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Egress(); !got.Equal(tc.want) {
				t.Errorf("egress %+v, want %+v", got, tc.want)
			}
			if len(o.warnings) > 0 {
				t.Errorf("warnings: %q", o.warnings)
			}
		})
	}
}

// TestEgressMasqueradeBadCIDRs: a bad non-masquerade CIDR is refused with
// the flag or the file's field (and the index in a list), the value and
// the reason.
func TestEgressMasqueradeBadCIDRs(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		args       []string
		want       string
	}{
		{"not a CIDR", "", []string{"--non-masquerade-cidrs", "10.0.0.0"},
			`--non-masquerade-cidrs "10.0.0.0": not a CIDR (want ADDRESS/BITS, e.g. 10.0.0.0/8)`},
		{"host bits", "", []string{"--non-masquerade-cidrs", "10.0.0.0/8,172.26.236.1/24"},
			`--non-masquerade-cidrs[1] "172.26.236.1/24": 172.26.236.1/24 has host bits set: the network is 172.26.236.0/24`},
		{"IPv4-mapped", "", []string{"--non-masquerade-cidrs", "::ffff:10.0.0.0/104"},
			`--non-masquerade-cidrs "::ffff:10.0.0.0/104": ::ffff:10.0.0.0/104 is an IPv4-mapped IPv6 prefix: write the IPv4 CIDR`},
		{"bits out of range", "", []string{"--non-masquerade-cidrs", "fd00::/129"},
			`--non-masquerade-cidrs "fd00::/129": not a CIDR`},
		{"in the file", "egressMasquerade:\n  nonMasqueradeCIDRs: [10.0.0.0/8, 10.1.2.3/16]\n", nil,
			`: egressMasquerade.nonMasqueradeCIDRs[1] "10.1.2.3/16": 10.1.2.3/16 has host bits set: the network is 10.1.0.0/16`},
		{"Service range", "", []string{"--service-cluster-ip-range", "10.96.0.0/33"}, `--service-cluster-ip-range "10.96.0.0/33"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseProxy(t, tc.body, append([]string{"--kubeconfig", "k", "--cluster-cidr", "192.168.0.0/16"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if tc.body != "" && !strings.HasPrefix(err.Error(), "--config ") {
				t.Errorf("err = %v: does not name the --config file", err)
			}
		})
	}
}

// TestEgressMasqueradeWarnings: settings that do nothing as configured are
// named, as are unknown fields of svcnet's section.
func TestEgressMasqueradeWarnings(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		args       []string
		want       []string
	}{
		{"CIDRs with egress masquerade off", "", []string{"--egress-masquerade=false", "--non-masquerade-cidrs", "10.0.0.0/8", "--masquerade-link-local"}, []string{
			`--non-masquerade-cidrs (egressMasquerade.nonMasqueradeCIDRs) "10.0.0.0/8": not used: egress masquerade is off`,
			`--masquerade-link-local (egressMasquerade.masqLinkLocal): not used: egress masquerade is off`,
		}},
		{"asked for beside another Service proxy", "", []string{"--data-plane", "none", "--egress-masquerade"}, []string{
			"--egress-masquerade (egressMasquerade): not applied: with --data-plane none svcnet programs no nftables table; the Service proxy or CNI plugin beside svcnet masquerades pod traffic, if anything does",
		}},
		{"the default beside another Service proxy", "", []string{"--data-plane", "none"}, nil},
		{"unknown field of the section", "egressMasquerade: {nonMasqueradeCidrs: [10.0.0.0/8], masqLinkLocalIPv6: true}\n", nil, []string{
			"unknown field egressMasquerade.masqLinkLocalIPv6: svcnet's egressMasquerade section has no such field (it has enabled, nonMasqueradeCIDRs, masqLinkLocal); ignored",
			"unknown field egressMasquerade.nonMasqueradeCidrs: svcnet's egressMasquerade section has no such field (it has enabled, nonMasqueradeCIDRs, masqLinkLocal); ignored",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _, err := parseProxy(t, tc.body, append([]string{"--kubeconfig", "k", "--cluster-cidr", "192.168.0.0/16"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range o.warnings {
				if _, rest, ok := strings.Cut(w, "proxy.yaml: "); ok {
					w = rest
				}
				got = append(got, w)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("warnings (-want +got):\n%s", d)
			}
		})
	}
}

// TestEgressSummary is the start log's description.
func TestEgressSummary(t *testing.T) {
	for _, tc := range []struct {
		cfg  proxy.Config
		want string
	}{
		{proxy.Config{EgressMasquerade: true, ClusterCIDRs: []netip.Prefix{pfx("192.168.0.0/16")}}, "IPv4 from 192.168.0.0/16|IPv6 off: no --cluster-cidr of the family"},
		{proxy.Config{EgressMasquerade: false, ClusterCIDRs: []netip.Prefix{pfx("192.168.0.0/16")}}, "IPv4 off|IPv6 off"},
	} {
		if got := strings.Join(egressSummary(tc.cfg), "|"); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.cfg, got, tc.want)
		}
	}
}

// TestDeployProxyConfigEgress reads each shipped proxy.yaml as svcnet proxy
// does: no warning, and egress masquerade on where svcnet replaces
// kube-proxy, off beside it.
func TestDeployProxyConfigEgress(t *testing.T) {
	for _, tc := range []struct {
		file string
		on   bool
	}{
		{"../../deploy/proxy/configmap.yaml", true},
		{"../../deploy/proxy/beside-kube-proxy/configmap.yaml", false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(b, &cm); err != nil {
				t.Fatalf("%s: %v", tc.file, err)
			}
			o, cfg, err := parseProxy(t, cm.Data["proxy.yaml"], "--kubeconfig", "k")
			if err != nil {
				t.Fatal(err)
			}
			if len(o.warnings) > 0 {
				t.Errorf("warnings: %q", o.warnings)
			}
			if cfg.EgressMasquerade != tc.on || (len(cfg.Egress().PodCIDRs) > 0) != tc.on {
				t.Errorf("egress masquerade %v (pod CIDRs %v), want %v", cfg.EgressMasquerade, cfg.Egress().PodCIDRs, tc.on)
			}
		})
	}
}

// TestTraceCommandEgress: `svcnet trace` from a pod to an address outside
// the cluster shows the egress masquerade hop with svcnet proxy's default
// settings, and not with --egress-masquerade=false or a non-masquerade CIDR
// holding the address; a bad CIDR is refused naming the flag.
func TestTraceCommandEgress(t *testing.T) {
	args := func(extra ...string) []string {
		return append([]string{"trace", "--state", traceState, "--service-cluster-ip-range", "10.96.0.0/12,fd00:96::/108",
			"--cluster-cidr", "192.168.0.0/16,fd00:192:168::/48", "--from", "default/client-2", "--to", "203.0.113.50:443"}, extra...)
	}
	for _, tc := range []struct {
		name   string
		extra  []string
		masq   bool
		errOut string
	}{
		{"default", nil, true, ""},
		{"off", []string{"--egress-masquerade=false"}, false, ""},
		{"non-masquerade CIDR", []string{"--non-masquerade-cidrs", "203.0.113.0/24"}, false, ""},
		{"a CIDR outside the address", []string{"--non-masquerade-cidrs", "198.51.100.0/24"}, true, ""},
		{"bad CIDR", []string{"--non-masquerade-cidrs", "203.0.113.1/24"}, false, `--non-masquerade-cidrs "203.0.113.1/24": 203.0.113.1/24 has host bits set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, args(tc.extra...)...)
			if tc.errOut != "" {
				if code == 0 || !strings.Contains(errOut, tc.errOut) {
					t.Fatalf("exit %d, stderr %q; want a failure saying %q", code, errOut, tc.errOut)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			shown := strings.Contains(out, "egress-masquerading #") && strings.Contains(out, "SNAT ") &&
				strings.Contains(out, "(egress masquerade: a pod's traffic leaving the cluster leaves with the node's address)") &&
				strings.Contains(out, "→ 172.26.236.178:")
			if shown != tc.masq || strings.Contains(out, "summary: 1 rewrite") != tc.masq {
				t.Errorf("egress masquerade shown: %v, want %v:\n%s", shown, tc.masq, out)
			}
		})
	}
}
