package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

	for _, tc := range []struct{ body, want string }{
		{"kind: Deployment\n", `kind "Deployment"`},
		{"mode: iptables\n", `mode "iptables"`},
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
