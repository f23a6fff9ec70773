package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/proxy"
)

func TestProxyConfigFileAndFlags(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "proxy.yaml")
	if err := os.WriteFile(p, []byte(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clusterCIDR: 192.168.0.0/16,fd00:192:168::/56
hostnameOverride: from-file
healthzBindAddress: 0.0.0.0:10256
metricsBindAddress: 127.0.0.1:10249
enableProfiling: true
nodePortAddresses: ["172.26.236.0/24"]
nftables:
  masqueradeAll: true
  syncPeriod: 45s
  minSyncPeriod: 2s
conntrack:
  maxPerCore: 0
`), 0o644); err != nil {
		t.Fatal(err)
	}
	o := &proxyOptions{}
	cmd := proxyCommand(o)
	if err := cmd.Flags().Parse([]string{"--config", p, "--min-sync-period", "500ms", "--hostname-override", "node1"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(cmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeName != "node1" || cfg.SyncPeriod != 45*time.Second || cfg.MinSyncPeriod != 500*time.Millisecond ||
		!cfg.MasqueradeAll || len(cfg.ClusterCIDRs) != 2 || cfg.NodePortAddresses[0] != "172.26.236.0/24" {
		t.Fatalf("merged config = %+v", cfg)
	}
	if !o.profiling {
		t.Error("enableProfiling: true did not turn profiling on")
	}
	if cfg.MasqueradeMark != 0x4000 || cfg.DetectLocalMode != proxy.LocalModeClusterCIDR {
		t.Errorf("defaults: mark %#x mode %q, want 0x4000 ClusterCIDR", cfg.MasqueradeMark, cfg.DetectLocalMode)
	}
	// conntrack.maxPerCore 0 from the file; the rest kube-proxy's defaults.
	want := conntrack.DefaultSysctlConfig()
	want.MaxPerCore = 0
	if got := o.conntrack.sysctls(); got != want {
		t.Errorf("conntrack = %+v, want %+v", got, want)
	}

	for _, tc := range []struct{ body, want string }{
		{"kind: Deployment\n", `kind "Deployment"`},
		{"mode: kernelspace\n", `mode "kernelspace": want one of svcnet's data planes (nftables, iptables, userspace`},
		{"mode: ipvs\n", `mode "ipvs": --data-plane ipvs: svcnet has no IPVS data plane`},
		{"nftables: [\n", "--config"},
	} {
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readKubeProxyConfig(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}

// TestProxyConfigWarnings: every KubeProxyConfiguration field svcnet proxy
// does not honour, and every field the type does not have, is named in one
// warning line with what svcnet does instead, whenever the file sets it; a
// field left at its zero value (what kubeadm writes for every field it does
// not set) is not.
func TestProxyConfigWarnings(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "proxy.yaml")
	cfgLine := func(rest string) string { return "--config " + p + ": " + rest }
	head := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nhostnameOverride: node1\n"
	for _, tc := range []struct {
		name  string
		body  string
		flags []string
		want  []string
	}{{
		name: "honoured fields only",
		body: `mode: nftables
clusterCIDR: 192.168.0.0/16
healthzBindAddress: 0.0.0.0:10256
metricsBindAddress: 127.0.0.1:10249
enableProfiling: false
nodePortAddresses: ["primary"]
nftables: {masqueradeBit: 12, masqueradeAll: true, syncPeriod: 30s, minSyncPeriod: 1s}
clientConnection: {kubeconfig: /etc/kubeconfig}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, tcpBeLiberal: true, udpTimeout: 30s, udpStreamTimeout: 2m}
detectLocalMode: ClusterCIDR
logging: {verbosity: 2}
syncPeriod: 45s
`,
	}, {
		name: "kubeadm's dump of kube-proxy's defaults: zero or svcnet's own values",
		body: `bindAddress: 0.0.0.0
bindAddressHardFail: null
clientConnection:
  acceptContentTypes: ""
  burst: 10
  contentType: application/vnd.kubernetes.protobuf
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 5
clusterCIDR: 192.168.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpBeLiberal: false
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
featureGates: {}
healthzBindAddress: ""
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: ""
mode: ""
nftables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
`,
	}, {
		name: "every field svcnet does not honour, set",
		body: `featureGates: {NFTablesProxyMode: true}
clientConnection: {acceptContentTypes: application/json, contentType: application/json, qps: 50, burst: 100}
logging: {format: json, flushFrequency: 5s, vmodule: [{filePattern: proxier.go, verbosity: 4}], options: {json: {infoBufferSize: 64Ki}}}
bindAddress: "::"
bindAddressHardFail: false
showHiddenMetricsForVersion: "1.35"
iptables: {masqueradeBit: 14, masqueradeAll: true, localhostNodePorts: true, syncPeriod: 10s, minSyncPeriod: 2s}
ipvs: {syncPeriod: 10s, minSyncPeriod: 2s, scheduler: rr, excludeCIDRs: [10.0.0.0/8], strictARP: true, tcpTimeout: 1m, tcpFinTimeout: 1m, udpTimeout: 1m}
winkernel: {networkName: vnet, sourceVip: 10.0.0.1, enableDSR: true, rootHnsEndpointName: ep, forwardHealthCheckVip: true}
oomScoreAdj: 0
configSyncPeriod: 15m
portRange: 30000-30100
windowsRunAsService: true
`,
		want: []string{
			cfgLine("bindAddress: svcnet takes the node's addresses from its Node object, and binds healthzBindAddress and metricsBindAddress as given; ignored"),
			cfgLine("bindAddressHardFail: svcnet proxy always exits when it cannot bind the healthz or metrics address; ignored"),
			cfgLine("clientConnection.acceptContentTypes: svcnet accepts protobuf, then JSON; ignored"),
			cfgLine("clientConnection.burst: svcnet's client keeps client-go's limits (5 requests/s, burst 10: svcnet proxy only lists and watches); ignored"),
			cfgLine("clientConnection.contentType: svcnet sends protobuf; ignored"),
			cfgLine("clientConnection.qps: svcnet's client keeps client-go's limits (5 requests/s, burst 10: svcnet proxy only lists and watches); ignored"),
			cfgLine("configSyncPeriod: svcnet's informers do not resync (a resync re-delivers unchanged objects, which svcnet skips); nftables.syncPeriod bounds the time to repair the kernel; ignored"),
			cfgLine("featureGates: svcnet proxy has no feature gates: what it implements is always on; ignored"),
			cfgLine("iptables.localhostNodePorts: svcnet never serves NodePorts on localhost (CVE-2020-8558), as kube-proxy's nftables mode; ignored"),
			cfgLine("iptables.masqueradeAll: svcnet runs mode nftables: nftables.masqueradeAll applies; ignored"),
			cfgLine("iptables.masqueradeBit: svcnet runs mode nftables: nftables.masqueradeBit applies; ignored"),
			cfgLine("iptables.minSyncPeriod: svcnet runs mode nftables: nftables.minSyncPeriod applies; ignored"),
			cfgLine("iptables.syncPeriod: svcnet runs mode nftables: nftables.syncPeriod applies; ignored"),
			cfgLine("ipvs.excludeCIDRs: svcnet has no IPVS data plane (--data-plane ipvs says why); ignored"),
			cfgLine("ipvs.minSyncPeriod: svcnet has no IPVS data plane (--data-plane ipvs says why); ignored"),
			cfgLine("ipvs.scheduler: svcnet has no IPVS data plane (--data-plane ipvs says why); ignored"),
			cfgLine("ipvs.strictARP: svcnet has no IPVS data plane (--data-plane ipvs says why); ignored"),
			cfgLine("ipvs.syncPeriod: svcnet has no IPVS data plane (--data-plane ipvs says why); ignored"),
			cfgLine("ipvs.tcpFinTimeout: svcnet has no IPVS data plane (--data-plane ipvs says why); ignored"),
			cfgLine("ipvs.tcpTimeout: svcnet has no IPVS data plane (--data-plane ipvs says why); ignored"),
			cfgLine("ipvs.udpTimeout: svcnet has no IPVS data plane (--data-plane ipvs says why); ignored"),
			cfgLine("logging.flushFrequency: klog flushes on its own schedule (every 5s); ignored"),
			cfgLine("logging.format: svcnet logs klog text; ignored"),
			cfgLine("logging.options: svcnet logs klog text, without format options; ignored"),
			cfgLine("logging.vmodule: svcnet has no per-file verbosity: logging.verbosity (-v) applies to all; ignored"),
			cfgLine("oomScoreAdj: svcnet proxy keeps the OOM score it was started with (set it where the process is started); ignored"),
			cfgLine("portRange: svcnet's userspace data plane listens on proxy ports the kernel chooses, as kube-proxy's did with an empty range; ignored"),
			cfgLine("showHiddenMetricsForVersion: svcnet has no hidden (deprecated) metrics to show; ignored"),
			cfgLine("windowsRunAsService: Windows only (svcnet proxy runs on Linux); ignored"),
			cfgLine("winkernel.enableDSR: Windows only (svcnet proxy runs on Linux); ignored"),
			cfgLine("winkernel.forwardHealthCheckVip: Windows only (svcnet proxy runs on Linux); ignored"),
			cfgLine("winkernel.networkName: Windows only (svcnet proxy runs on Linux); ignored"),
			cfgLine("winkernel.rootHnsEndpointName: Windows only (svcnet proxy runs on Linux); ignored"),
			cfgLine("winkernel.sourceVip: Windows only (svcnet proxy runs on Linux); ignored"),
		},
	}, {
		name: "fields KubeProxyConfiguration does not have",
		body: `masqueradeBit: 3
nftables: {masqueradeBits: 3, MasqueradeAll: true}
conntrack: {maxPerCPU: 1}
ipvs: 5
metadata: {name: x}
`,
		want: []string{
			cfgLine("unknown field conntrack.maxPerCPU: KubeProxyConfiguration v1alpha1 has no such field; ignored"),
			cfgLine("ipvs: not a mapping of fields; ignored"),
			cfgLine("unknown field masqueradeBit: KubeProxyConfiguration v1alpha1 has no such field; ignored"),
			cfgLine("unknown field metadata: KubeProxyConfiguration v1alpha1 has no such field; ignored"),
			cfgLine("unknown field nftables.MasqueradeAll: KubeProxyConfiguration v1alpha1 has no such field; ignored"),
			cfgLine("unknown field nftables.masqueradeBits: KubeProxyConfiguration v1alpha1 has no such field; ignored"),
		},
	}, {
		name: "detect-local settings the mode does not use",
		body: `clusterCIDR: 192.168.0.0/16
detectLocalMode: NodeCIDR
detectLocal: {bridgeInterface: cbr0}
egressMasquerade: {enabled: false}
`,
		flags: []string{"--pod-interface-name-prefix", "veth"},
		want: []string{
			`--cluster-cidr (clusterCIDR) "192.168.0.0/16": not used: detect-local-mode is NodeCIDR and egress masquerade is off`,
			`--pod-bridge-interface (detectLocal.bridgeInterface) "cbr0": not used: detect-local-mode is NodeCIDR`,
			`--pod-interface-name-prefix (detectLocal.interfaceNamePrefix) "veth": not used: detect-local-mode is NodeCIDR`,
		},
	}, {
		name:  "conntrack beside another Service proxy",
		body:  "conntrack: {tcpCloseWaitTimeout: 1h}\n",
		flags: []string{"--data-plane", "none", "--pod-routes", "--conntrack-udp-timeout", "30s"},
		want:  []string{"--conntrack-udp-timeout, conntrack.*: not applied: with --data-plane none the conntrack sysctls are left to the Service proxy beside svcnet"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(p, []byte(head+tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			o := &proxyOptions{}
			cmd := proxyCommand(o)
			if err := cmd.Flags().Parse(append([]string{"--config", p}, tc.flags...)); err != nil {
				t.Fatal(err)
			}
			if _, err := o.config(cmd.Flags()); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, o.warnings); d != "" {
				t.Errorf("warnings (-want +got):\n%s", d)
			}
			if o.masqueradeAll && !strings.Contains(tc.body, "masqueradeAll: true") {
				t.Errorf("masquerade-all on from a field that is not nftables.masqueradeAll")
			}
			// kube-proxy defaults an empty address: the servers stay on.
			if o.healthzAddr != "0.0.0.0:10256" || o.metricsAddr != "127.0.0.1:10249" {
				t.Errorf("healthz %q metrics %q, want 0.0.0.0:10256 127.0.0.1:10249", o.healthzAddr, o.metricsAddr)
			}
		})
	}
}

// TestKubeProxyFieldsCoverV1alpha1 checks the field table against the JSON
// names of the type kube-proxy v1.36 reads (KubeProxyConfiguration in
// k8s.io/kube-proxy/config/v1alpha1/types.go, with component-base's
// ClientConnectionConfiguration and LoggingConfiguration), listed here:
// every field is either honoured or has a warning, so none is dropped
// silently.
func TestKubeProxyFieldsCoverV1alpha1(t *testing.T) {
	v1alpha1 := []string{
		"apiVersion", "kind", "featureGates",
		"clientConnection.kubeconfig", "clientConnection.acceptContentTypes", "clientConnection.contentType", "clientConnection.qps", "clientConnection.burst",
		"logging.format", "logging.flushFrequency", "logging.verbosity", "logging.vmodule", "logging.options",
		"hostnameOverride", "bindAddress", "healthzBindAddress", "metricsBindAddress", "bindAddressHardFail", "enableProfiling",
		"showHiddenMetricsForVersion", "mode",
		"iptables.masqueradeBit", "iptables.masqueradeAll", "iptables.localhostNodePorts", "iptables.syncPeriod", "iptables.minSyncPeriod",
		"ipvs.syncPeriod", "ipvs.minSyncPeriod", "ipvs.scheduler", "ipvs.excludeCIDRs", "ipvs.strictARP", "ipvs.tcpTimeout", "ipvs.tcpFinTimeout", "ipvs.udpTimeout",
		"nftables.masqueradeBit", "nftables.masqueradeAll", "nftables.syncPeriod", "nftables.minSyncPeriod",
		"winkernel.networkName", "winkernel.sourceVip", "winkernel.enableDSR", "winkernel.rootHnsEndpointName", "winkernel.forwardHealthCheckVip",
		"detectLocalMode", "detectLocal.bridgeInterface", "detectLocal.interfaceNamePrefix", "clusterCIDR", "nodePortAddresses", "oomScoreAdj",
		"conntrack.maxPerCore", "conntrack.min", "conntrack.tcpEstablishedTimeout", "conntrack.tcpCloseWaitTimeout", "conntrack.tcpBeLiberal",
		"conntrack.udpTimeout", "conntrack.udpStreamTimeout",
		"configSyncPeriod", "portRange", "windowsRunAsService",
	}
	for _, f := range v1alpha1 {
		if _, ok := fieldIndex[f]; !ok {
			t.Errorf("KubeProxyConfiguration field %s is missing from kubeProxyFields", f)
		}
	}
	for _, f := range kubeProxyFields {
		if !slices.Contains(v1alpha1, f.path) && f.path != "syncPeriod" && f.path != "minSyncPeriod" {
			t.Errorf("kubeProxyFields has %s, which KubeProxyConfiguration v1alpha1 does not", f.path)
		}
	}
}

// TestProxyConfigNewSettings: masqueradeBit, the detect-local modes and the
// conntrack settings from the file, flags winning over it, kube-proxy's
// flag names, and bad values refused naming the setting.
func TestProxyConfigNewSettings(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "proxy.yaml")
	if err := os.WriteFile(p, []byte(`kind: KubeProxyConfiguration
hostnameOverride: node1
healthzBindAddress: 0.0.0.0
metricsBindAddress: "[::1]"
nftables: {masqueradeBit: 5}
detectLocalMode: InterfaceNamePrefix
detectLocal: {interfaceNamePrefix: cali}
conntrack: {maxPerCore: 65536, min: 1, tcpEstablishedTimeout: 2h, tcpCloseWaitTimeout: 20m, tcpBeLiberal: true, udpTimeout: 30s, udpStreamTimeout: 3m}
logging: {verbosity: 3}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) (*proxyOptions, proxy.Config, error) {
		o := &proxyOptions{}
		cmd := proxyCommand(o)
		if err := cmd.Flags().Parse(append([]string{"--config", p}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := o.config(cmd.Flags())
		return o, cfg, err
	}
	o, cfg, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MasqueradeMark != 1<<5 || cfg.DetectLocalMode != proxy.LocalModeInterfaceNamePrefix || cfg.PodInterfaceNamePrefix != "cali" ||
		o.verbosity != 3 || o.healthzAddr != "0.0.0.0:10256" || o.metricsAddr != "[::1]:10249" {
		t.Errorf("from the file: %+v, verbosity %d, healthz %q metrics %q", cfg, o.verbosity, o.healthzAddr, o.metricsAddr)
	}
	want := conntrack.SysctlConfig{MaxPerCore: 65536, Min: 1, TCPEstablishedTimeout: 2 * time.Hour, TCPCloseWaitTimeout: 20 * time.Minute,
		TCPBeLiberal: true, UDPTimeout: 30 * time.Second, UDPStreamTimeout: 3 * time.Minute}
	if got := o.conntrack.sysctls(); got != want {
		t.Errorf("conntrack = %+v, want %+v", got, want)
	}

	o, cfg, err = parse("--iptables-masquerade-bit", "0", "--detect-local-mode", "BridgeInterface", "--pod-bridge-interface", "cbr0",
		"--conntrack-max-per-core", "0", "--conntrack-tcp-timeout-close-wait", "0s", "-v", "1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MasqueradeMark != 1 || cfg.DetectLocalMode != proxy.LocalModeBridgeInterface || cfg.PodBridgeInterface != "cbr0" || o.verbosity != 1 {
		t.Errorf("flags over the file: %+v, verbosity %d", cfg, o.verbosity)
	}
	want.MaxPerCore, want.TCPCloseWaitTimeout = 0, 0
	if got := o.conntrack.sysctls(); got != want {
		t.Errorf("conntrack = %+v, want %+v", got, want)
	}
	if d := cmp.Diff([]string{`--pod-interface-name-prefix (detectLocal.interfaceNamePrefix) "cali": not used: detect-local-mode is BridgeInterface`}, o.warnings); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--masquerade-bit", "32"}, "--masquerade-bit 32: must be within [0, 31]"},
		{[]string{"--detect-local-mode", "PodCIDR"}, `detect-local mode "PodCIDR"`},
		{[]string{"--detect-local-mode", "BridgeInterface"}, "--pod-bridge-interface"},
	} {
		if _, _, err := parse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	if err := os.WriteFile(p, []byte("nftables: {masqueradeBit: 40}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readKubeProxyConfig(p); err == nil || !strings.Contains(err.Error(), "nftables.masqueradeBit 40") {
		t.Errorf("masqueradeBit 40: err = %v", err)
	}
}

// TestProxyConfigModeIPTables: mode iptables selects the iptables data plane
// (unless --data-plane says otherwise) and its section, iptables.*, applies
// as kube-proxy's does; nftables.* is then named in a warning.
func TestProxyConfigModeIPTables(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(p, []byte(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
iptables: {masqueradeBit: 12, masqueradeAll: true, syncPeriod: 40s, minSyncPeriod: 3s}
nftables: {masqueradeBit: 20}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags []string
		plane string
	}{{nil, "iptables"}, {[]string{"--data-plane", "nftables"}, "nftables"}} {
		o := &proxyOptions{}
		cmd := proxyCommand(o)
		if err := cmd.Flags().Parse(append([]string{"--config", p}, tc.flags...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := o.config(cmd.Flags())
		if err != nil {
			t.Fatal(err)
		}
		if o.dataPlane != tc.plane {
			t.Errorf("flags %v: data plane %q, want %q", tc.flags, o.dataPlane, tc.plane)
		}
		if cfg.MasqueradeMark != 1<<12 || !cfg.MasqueradeAll || cfg.SyncPeriod != 40*time.Second || cfg.MinSyncPeriod != 3*time.Second {
			t.Errorf("flags %v: iptables.* not applied: %+v", tc.flags, cfg)
		}
	}
	c, err := readKubeProxyConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	want := "--config " + p + ": nftables.masqueradeBit: svcnet runs mode iptables: iptables.masqueradeBit applies; ignored"
	if !slices.Contains(c.warnings, want) {
		t.Errorf("warnings = %q, want %q among them", c.warnings, want)
	}
}
