package cluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

func TestCheckProxy(t *testing.T) {
	tests := []struct {
		proxy, controlPlane string
		wantErr             string // "" for valid
	}{
		{ProxySvcnet, ControlPlaneFile, ""},
		{ProxySvcnet, ControlPlaneKube, ""},
		{ProxyKubeProxyNFTables, ControlPlaneKube, ""},
		{ProxyKubeProxyIPTables, ControlPlaneKube, ""},
		{ProxyKubeProxyNFTables, ControlPlaneFile, "lab x: --proxy kube-proxy-nftables needs --control-plane kube: kube-proxy reads a real kube-apiserver, and the file control plane has none"},
		{ProxyKubeProxyIPTables, ControlPlaneFile, "--proxy kube-proxy-iptables needs --control-plane kube"},
		{"kube-proxy-ipvs", ControlPlaneKube, `--proxy "kube-proxy-ipvs": want one of svcnet, kube-proxy-nftables, kube-proxy-iptables`},
	}
	for _, tt := range tests {
		err := CheckProxy("x", tt.proxy, tt.controlPlane)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckProxy(%s, %s): %v", tt.proxy, tt.controlPlane, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("CheckProxy(%s, %s): err = %v, want %q", tt.proxy, tt.controlPlane, err, tt.wantErr)
		}
	}
}

func TestCheckKubeProxyBinary(t *testing.T) {
	if err := CheckKubeProxyBinary("x", ProxySvcnet, ""); err != nil {
		t.Errorf("svcnet needs no kube-proxy: %v", err)
	}
	err := CheckKubeProxyBinary("x", ProxyKubeProxyNFTables, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no kube-proxy executable") || !strings.Contains(err.Error(), "tools/k8s/build.sh") {
		t.Errorf("empty directory: err = %v, want one naming kube-proxy and tools/k8s/build.sh", err)
	}
}

func TestCheckDataPlane(t *testing.T) {
	for _, proxy := range []string{ProxySvcnet, ProxyKubeProxyNFTables} {
		if err := CheckDataPlane("x", proxy, ""); err != nil {
			t.Errorf("CheckDataPlane(%s, none given): %v", proxy, err)
		}
	}
	if err := CheckDataPlane("x", ProxySvcnet, "nftables"); err != nil {
		t.Errorf("CheckDataPlane(svcnet, nftables): %v", err)
	}
	err := CheckDataPlane("x", ProxyKubeProxyIPTables, "nftables")
	if want := `lab x: data plane "nftables": the nodes run kube-proxy-iptables for Services`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckDataPlane(kube-proxy-iptables, nftables): err = %v, want %q", err, want)
	}
}

// A swap deletes iptables-nft's tables after the cleanup of a proxy that
// programmed iptables: kube-proxy in either mode, svcnet proxy's iptables
// plane; not after svcnet proxy's nftables or userspace plane.
func TestUsedIPTables(t *testing.T) {
	tests := []struct {
		proxy, dataPlane string
		want             bool
	}{
		{ProxyKubeProxyNFTables, "", true},
		{ProxyKubeProxyIPTables, "", true},
		{ProxySvcnet, "iptables", true},
		{ProxySvcnet, "", false},
		{ProxySvcnet, "nftables", false},
		{ProxySvcnet, "userspace", false},
		{ProxySvcnet, "none", false},
	}
	for _, tt := range tests {
		if got := usedIPTables(tt.proxy, tt.dataPlane); got != tt.want {
			t.Errorf("usedIPTables(%s, %q) = %v, want %v", tt.proxy, tt.dataPlane, got, tt.want)
		}
	}
}

func TestAgentArgv(t *testing.T) {
	state := []string{"--kubeconfig", "/run/kc"}
	key := topology.Names{Lab: "x"}.HeartbeatKey()
	got := svcnetProxyArgv(&Info{Binary: "/bin/svcnet", Proxy: ProxySvcnet, ProxyArgs: []string{"--min-sync-period", "0s"}}, state, 2, key)
	want := []string{"/bin/svcnet", "proxy", "--kubeconfig", "/run/kc", "--hostname-override", "node2", "--pod-routes",
		"--cluster-cidr", "192.168.0.0/16", "--announce", "l2", "--announce-key-file", "/run/svcnet/lab/x/heartbeat.key", "--v", "1", "--min-sync-period", "0s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("svcnet proxy argv (-want +got):\n%s", diff)
	}
	// Beside kube-proxy: no Service data plane, off kube-proxy's ports; the
	// lab's extra flags still last.
	got = svcnetProxyArgv(&Info{Binary: "/bin/svcnet", Proxy: ProxyKubeProxyIPTables, ProxyArgs: []string{"--v", "2"}}, state, 2, key)
	want = []string{"/bin/svcnet", "proxy", "--kubeconfig", "/run/kc", "--hostname-override", "node2", "--pod-routes",
		"--cluster-cidr", "192.168.0.0/16", "--announce", "l2", "--announce-key-file", "/run/svcnet/lab/x/heartbeat.key", "--v", "1",
		"--data-plane", "none", "--healthz-bind-address", "0.0.0.0:10266", "--metrics-bind-address", "127.0.0.1:10269", "--v", "2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("svcnet proxy beside kube-proxy argv (-want +got):\n%s", diff)
	}
	// A data plane for svcnet proxy: its --data-plane, before the lab's
	// extra flags.
	got = svcnetProxyArgv(&Info{Binary: "/bin/svcnet", Proxy: ProxySvcnet, DataPlane: "none", ProxyArgs: []string{"--v", "2"}}, state, 1, key)
	want = []string{"/bin/svcnet", "proxy", "--kubeconfig", "/run/kc", "--hostname-override", "node1", "--pod-routes",
		"--cluster-cidr", "192.168.0.0/16", "--announce", "l2", "--announce-key-file", "/run/svcnet/lab/x/heartbeat.key", "--v", "1",
		"--data-plane", "none", "--v", "2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("svcnet proxy with a data plane argv (-want +got):\n%s", diff)
	}
	// The eBPF plane: the node's cgroup, by its cgroup v2 path, and its pins.
	info := &Info{Name: "x", Binary: "/bin/svcnet", Proxy: ProxySvcnet, DataPlane: DataPlaneEBPF}
	got = svcnetProxyArgv(info, state, 1, key)
	want = []string{"/bin/svcnet", "proxy", "--kubeconfig", "/run/kc", "--hostname-override", "node1", "--pod-routes",
		"--cluster-cidr", "192.168.0.0/16", "--announce", "l2", "--announce-key-file", "/run/svcnet/lab/x/heartbeat.key", "--v", "1",
		"--data-plane", "ebpf", "--cgroup", "/svcnet-lab-x/node1", "--bpf-pin-dir", "/run/svcnet/lab/x/bpf/node1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("svcnet proxy on the eBPF plane argv (-want +got):\n%s", diff)
	}
	if !proxyNeedsCgroup(info) || proxyNeedsCgroup(&Info{Proxy: ProxySvcnet, DataPlane: "nftables"}) || proxyNeedsCgroup(&Info{Proxy: ProxySvcnet}) {
		t.Error("proxyNeedsCgroup: want true for the eBPF plane only")
	}
	for proxy, mode := range map[string]string{ProxyKubeProxyNFTables: "nftables", ProxyKubeProxyIPTables: "iptables"} {
		got = kubeProxyArgv(&Info{K8sBin: "/k8s", Proxy: proxy}, state, 1)
		want = []string{"/k8s/kube-proxy", "--kubeconfig", "/run/kc", "--proxy-mode", mode, "--hostname-override", "node1",
			"--cluster-cidr", "192.168.0.0/16", "--nodeport-addresses", "primary", "--conntrack-max-per-core=0",
			"--healthz-bind-address", "0.0.0.0:10256", "--metrics-bind-address", "127.0.0.1:10249", "--v=2"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s argv (-want +got):\n%s", proxy, diff)
		}
	}
}

func TestAgentKind(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{svcnetProxyArgv(&Info{Binary: "/bin/svcnet", Proxy: ProxySvcnet}, nil, 1, "/k"), ProxySvcnet},
		{svcnetProxyArgv(&Info{Binary: "/bin/svcnet", Proxy: ProxyKubeProxyNFTables}, nil, 1, "/k"), ProxySvcnet},
		{kubeProxyArgv(&Info{K8sBin: "/k8s", Proxy: ProxyKubeProxyNFTables}, nil, 1), kubeProxyBinary},
		{kubeProxyArgv(&Info{K8sBin: "/k8s", Proxy: ProxyKubeProxyNFTables}, nil, 2), ""}, // another node's
		{[]string{"/bin/svcnet", "echo", "--name", "node1"}, ""},
		{[]string{"sleep", "100"}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := agentKind(tt.argv, "node1"); got != tt.want {
			t.Errorf("agentKind(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}

func TestSyncedChecks(t *testing.T) {
	// kube-proxy v1.36 /healthz bodies: status appears once a family updated.
	if err := healthSynced([]byte(`{"lastUpdated":"2026-01-01T00:00:00Z","currentTime":"2026-01-01T00:00:00Z","nodeEligible":true,"healthy":true}`)); err == nil {
		t.Error("healthz without status: counted as synced")
	}
	if err := healthSynced([]byte(`{"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-01-01T00:00:00Z","healthy":true}}}`)); err != nil {
		t.Errorf("healthz with IPv4 status: %v", err)
	}
	if err := healthSynced([]byte(`not json`)); err == nil {
		t.Error("healthz garbage: counted as synced")
	}
	metrics := "# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\n" +
		`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7e+09` + "\n"
	if err := lastSynced(metrics); err == nil {
		t.Error("metrics with only an IPv6 sync: counted as an IPv4 sync")
	}
	if err := lastSynced(metrics + `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7956723358337831e+09` + "\n"); err != nil {
		t.Errorf("metrics with an IPv4 sync: %v", err)
	}
	if err := lastSynced(`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 0` + "\n"); err == nil {
		t.Error("metrics with a zero timestamp: counted as synced")
	}
}

func TestLeftoverParsing(t *testing.T) {
	out := `{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
		{"table": {"family": "ip", "name": "kube-proxy", "handle": 51}},
		{"table": {"family": "ip", "name": "svcnet-hostport", "handle": 2}},
		{"table": {"family": "ip", "name": "nat", "handle": 53}},
		{"table": {"family": "ip6", "name": "filter", "handle": 54}},
		{"table": {"family": "inet", "name": "filter", "handle": 55}}]}`
	tables, err := foreignTables(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ip kube-proxy", "ip nat", "ip6 filter", "inet filter"}, tables); diff != "" {
		t.Errorf("foreignTables (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ip nat", "ip6 filter"}, iptablesNFTTables(tables)); diff != "" {
		t.Errorf("iptablesNFTTables (-want +got):\n%s", diff)
	}
	if _, err := foreignTables("table ip svcnet"); err == nil {
		t.Error("foreignTables of text output: no error")
	}
	save := "# Generated by iptables-save\n*filter\n:INPUT ACCEPT [0:0]\n:KUBE-FIREWALL - [0:0]\n-A INPUT -j KUBE-FIREWALL\nCOMMIT\n"
	if diff := cmp.Diff([]string{"iptables chain KUBE-FIREWALL"}, kubeChains(save)); diff != "" {
		t.Errorf("kubeChains (-want +got):\n%s", diff)
	}
}
