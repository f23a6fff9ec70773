package nodecluster

import (
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// Paths inside a node's mount namespace (see mounts.go), as on a real node.
const (
	containerdSocket = "/run/containerd/containerd.sock"
	cniBinDir        = "/opt/cni/bin"
	cniConfDir       = "/etc/cni/net.d"
	// kubeletHealthz is the kubelet's healthz address in the node's namespace.
	kubeletHealthzPort = 10248
)

// containerdConfig is a node's containerd configuration (version 4, containerd
// 2.4; no imports, so no file of the host's /etc/containerd/conf.d applies):
// the real node's paths, runc from runcPath through the runc v2 shim
// with the cgroupfs driver (SystemdCgroup false, which containerd also
// reports to the kubelet), CNI with containerd's own loopback, the sandbox
// image, and restrict_oom_score_adj: without CAP_SYS_RESOURCE in the bounding
// set a container's negative oom_score_adj is refused and runc fails ("can't
// get final child's PID from pipe").
func containerdConfig(runcPath, pauseImage string) string {
	q := tomlString
	return fmt.Sprintf(`version = 4
root = "/var/lib/containerd"
state = "/run/containerd"
imports = []

[plugins.'io.containerd.server.v1.grpc']
  address = %s

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %s

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %s
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%s]
    conf_dir = %s
    max_conf_num = 1
    use_internal_loopback = true
`, q(containerdSocket), q(pauseImage), q(runcPath), q(cniBinDir), q(cniConfDir))
}

// tomlString quotes s as a TOML basic string (strconv.Quote's escapes for
// the printable ASCII paths and references used here are TOML's).
func tomlString(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		panic(fmt.Sprintf("nodecluster: %q is not printable ASCII", s))
	}
	return strconv.Quote(s)
}

// kubeletConfig is node n's KubeletConfiguration. On this machine kind:
// failCgroupV1 false (cgroup v1 controllers on a hybrid host), the cgroupfs
// driver under a cgroupRoot of the node's own (see cgroup.go), failSwapOn
// false, and protectKernelDefaults true over the node's view of the kernel
// settings (see kernelDefaults). The kubelet serves its API to anyone who
// reaches its namespace (anonymous, AlwaysAllow: the apiserver's exec, logs
// and port-forward, without client certificates), and evicts only when the
// disk is nearly full, since the disk is shared with the host.
func kubeletConfig(cgroupRoot string) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               "/" + cgroupRoot,
		"failSwapOn":               false,
		"protectKernelDefaults":    true,
		"containerRuntimeEndpoint": "unix://" + containerdSocket,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              kubeletHealthzPort,
		"readOnlyPort":             0,
		"clusterDomain":            "cluster.local",
		"clusterDNS":               []string{topology.ClusterDNS.String()},
		"resolvConf":               "/etc/resolv.conf",
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"serializeImagePulls":         false,
		"rotateCertificates":          false,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
			"nodefs.inodesFree": "1%",
		},
		"logging": map[string]any{"format": "text"},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	return b, nil
}
