package nodecluster

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestOptionsRefuse(t *testing.T) {
	bins := t.TempDir()
	for _, b := range []string{"etcd", "runc", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if err := os.WriteFile(filepath.Join(bins, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	base := Options{Name: "nc", Dir: filepath.Join(t.TempDir(), "c"), K8sBin: bins, ContainerdBin: bins,
		EtcdBin: filepath.Join(bins, "etcd"), Runc: filepath.Join(bins, "runc")}
	o, err := base.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Nodes != DefaultNodes || o.PauseImage != DefaultPauseImage || o.ReadyTimeout != DefaultReadyTimeout || o.Zone(2) != "zone-b" {
		t.Errorf("defaults: %+v", o)
	}
	for name, tc := range map[string]struct {
		mutate func(*Options)
		want   string
	}{
		"bad name":        {func(o *Options) { o.Name = "a.b" }, "lab name"},
		"no dir":          {func(o *Options) { o.Dir = "" }, "Dir is required"},
		"relative dir":    {func(o *Options) { o.Dir = "x" }, "not absolute"},
		"dir under /run":  {func(o *Options) { o.Dir = "/run/svcnet/x" }, "under /run"},
		"dir in /var/lib": {func(o *Options) { o.Dir = "/var/lib/x" }, "under /var/lib"},
		"too many nodes":  {func(o *Options) { o.Nodes = 1000 }, "1000 nodes"},
		"no kube bins":    {func(o *Options) { o.K8sBin = t.TempDir() }, "kube-apiserver: no such file"},
		"no containerd":   {func(o *Options) { o.ContainerdBin = "" }, "ContainerdBin"},
		"missing image":   {func(o *Options) { o.Images = []string{"/nonexistent.tar"} }, "nonexistent.tar"},
		"plugin in /opt":  {func(o *Options) { o.CNIPlugin = "/opt/nonexistent" }, "nonexistent"},
	} {
		o := base
		tc.mutate(&o)
		if _, err := o.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", name, err, tc.want)
		}
	}
}

func TestNodesOf(t *testing.T) {
	got := nodesOf(Options{Name: "x", Nodes: 3, Zone: DefaultZone})
	want := []Node{
		{Name: "node1", Index: 1, Addr: netip.MustParseAddr("172.26.236.177"), PodCIDR: netip.MustParsePrefix("192.168.1.0/24"), Zone: "zone-a", NetNS: "x.node1"},
		{Name: "node2", Index: 2, Addr: netip.MustParseAddr("172.26.236.178"), PodCIDR: netip.MustParsePrefix("192.168.2.0/24"), Zone: "zone-b", NetNS: "x.node2"},
		{Name: "node3", Index: 3, Addr: netip.MustParseAddr("172.26.236.179"), PodCIDR: netip.MustParsePrefix("192.168.3.0/24"), Zone: "zone-c", NetNS: "x.node3"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d nodes", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("node %d: got %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

// The kubelet settings this machine kind needs, and those that keep the host
// as it is.
func TestKubeletConfig(t *testing.T) {
	b, err := kubeletConfig("svcnet.x/node1")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"kind":                     "KubeletConfiguration",
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               "/svcnet.x/node1",
		"failSwapOn":               false,
		"protectKernelDefaults":    true,
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"readOnlyPort":             float64(0),
	} {
		if cfg[k] != want {
			t.Errorf("%s = %v, want %v", k, cfg[k], want)
		}
	}
	if dns, _ := cfg["clusterDNS"].([]any); len(dns) != 1 || dns[0] != "10.96.0.10" {
		t.Errorf("clusterDNS = %v", cfg["clusterDNS"])
	}
	again, _ := kubeletConfig("svcnet.x/node1")
	if string(again) != string(b) {
		t.Error("kubelet config is not deterministic")
	}
}

func TestContainerdConfig(t *testing.T) {
	got := containerdConfig("/usr/sbin/runc", "registry.k8s.io/pause:3.10.2")
	for _, want := range []string{
		"version = 4\n",
		"imports = []\n",
		`address = "/run/containerd/containerd.sock"`,
		`sandbox = "registry.k8s.io/pause:3.10.2"`,
		"restrict_oom_score_adj = true",
		`BinaryName = "/usr/sbin/runc"`,
		"SystemdCgroup = false",
		`bin_dirs = ["/opt/cni/bin"]`,
		`conf_dir = "/etc/cni/net.d"`,
		"use_internal_loopback = true",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("containerd config lacks %q:\n%s", want, got)
		}
	}
}

func TestKernelDefaultsMatchFiles(t *testing.T) {
	dir := t.TempDir()
	n := nodesOf(Options{Name: "x", Nodes: 1, Zone: DefaultZone})[0]
	if err := prepareNodeFS(dir, n); err != nil {
		t.Fatal(err)
	}
	for _, kd := range kernelDefaults {
		b, err := os.ReadFile(filepath.Join(fsDir(dir), "sysctl", strings.ReplaceAll(kd.key, "/", ".")))
		if err != nil || strings.TrimSpace(string(b)) != kd.value {
			t.Errorf("%s: %q, %v; want %s", kd.key, b, err, kd.value)
		}
	}
	b, err := os.ReadFile(filepath.Join(fsDir(dir), "etc-upper/hostname"))
	if err != nil || string(b) != "node1\n" {
		t.Errorf("hostname: %q, %v", b, err)
	}
}
