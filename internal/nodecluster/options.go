package nodecluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/image"
	"github.com/svcnet/svcnet/internal/kubecluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/process"
)

// Options configures Up.
type Options struct {
	// Name prefixes the cluster's network namespaces (NAME.fabric, NAME.cp,
	// NAME.nodeN) and names its cgroups (svcnet.NAME); a lab name (lower-case
	// letters, digits, '-'; topology.ValidateName). Required.
	Name string
	// Dir holds everything the cluster owns (see the package doc); created, and
	// removed by Down. It must be absolute and must not lie under a path every
	// node covers with its own (/run, /var/lib, /var/log, /opt, /etc, /sys,
	// /proc): the nodes read their configuration from it. Required.
	Dir string
	// Nodes is the number of nodes; default DefaultNodes, at most topology.MaxNodes.
	Nodes int

	// K8sBin holds kube-apiserver, kube-controller-manager, kube-scheduler and
	// kubelet (tools/k8s/build.sh). Required.
	K8sBin string
	// EtcdBin is the etcd binary; default kubecluster.FindEtcd.
	EtcdBin string
	// ContainerdBin holds containerd, containerd-shim-runc-v2 and ctr
	// (tools/containerd/build.sh). Required.
	ContainerdBin string
	// Runc is the OCI runtime binary; default runc on PATH.
	Runc string

	// CNIPlugin, when set, is svcnet's binary: Up installs it on every node as
	// `svcnet cni install` does (internal/cni/install: /opt/cni/bin/svcnet and
	// loopback, /etc/cni/net.d/10-svcnet.conflist with the Node's pod CIDR), so
	// the nodes are Ready at once. Without it the nodes stay NotReady until
	// something installs a CNI network (deploy/cni's DaemonSet does): Up then
	// returns once the kubelets run (see WaitReady).
	CNIPlugin string
	// Images are image tarballs (docker-archive or OCI layout tar) imported into
	// every node's containerd (namespace k8s.io) before the kubelets start.
	// PauseImage must be among them (or imported before Pods are created).
	Images []string
	// PauseImage is containerd's sandbox image; default DefaultPauseImage.
	PauseImage string
	// Zone gives node i's topology.kubernetes.io/zone label; default
	// DefaultZone (one zone per node).
	Zone func(i int) string

	// Detach runs every process in its own session so that it outlives the
	// caller (for a CLI); Down stops them. Without it, every process dies with
	// the caller (SIGKILL as parent-death signal), and what cannot (the
	// containers' shims, the containers) is left for Down.
	Detach bool
	// ReadyTimeout bounds each wait of Up (a control-plane component, a node's
	// mounts, containerd, an image import, the kubelet, Nodes Ready); default
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// Defaults.
const (
	DefaultNodes        = 3
	DefaultPauseImage   = image.PauseImage
	DefaultReadyTimeout = 3 * time.Minute
)

// DefaultZone is node i's zone by default: zone-a for node1, zone-b for node2, ...
func DefaultZone(i int) string {
	if i >= 1 && i <= 26 {
		return "zone-" + string(rune('a'+i-1))
	}
	return fmt.Sprintf("zone-%d", i)
}

// coveredPaths are the paths every node replaces with its own in its mount
// namespace (see mounts.go), and the kernel's.
var coveredPaths = []string{"/run", "/var/run", "/var/lib", "/var/log", "/opt", "/etc", "/sys", "/proc"}

// withDefaults applies the defaults and checks o.
func (o Options) withDefaults() (Options, error) {
	if err := topology.ValidateName(o.Name); err != nil {
		return o, fmt.Errorf("options: %w", err)
	}
	if o.Dir == "" {
		return o, errors.New("options: Dir is required")
	}
	if !filepath.IsAbs(o.Dir) {
		return o, fmt.Errorf("options: dir %s: not absolute", o.Dir)
	}
	o.Dir = filepath.Clean(o.Dir)
	if err := notCovered("dir", o.Dir); err != nil {
		return o, fmt.Errorf("options: %w", err)
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.Nodes < 1 || o.Nodes > topology.MaxNodes {
		return o, fmt.Errorf("options: %d nodes: want 1 to %d", o.Nodes, topology.MaxNodes)
	}
	if o.EtcdBin == "" {
		var err error
		if o.EtcdBin, err = kubecluster.FindEtcd(); err != nil {
			return o, fmt.Errorf("options: %w", err)
		}
	}
	if o.Runc == "" {
		p, err := exec.LookPath("runc")
		if err != nil {
			return o, fmt.Errorf("options: runc: %w", err)
		}
		o.Runc = p
	}
	if o.K8sBin == "" || o.ContainerdBin == "" {
		return o, errors.New("options: K8sBin and ContainerdBin are required")
	}
	bins := []string{o.EtcdBin, o.Runc}
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		bins = append(bins, filepath.Join(o.K8sBin, b))
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		bins = append(bins, filepath.Join(o.ContainerdBin, b))
	}
	if o.CNIPlugin != "" {
		bins = append(bins, o.CNIPlugin)
	}
	for _, b := range bins {
		if err := process.CheckExecutable(b); err != nil {
			return o, fmt.Errorf("options: %w", err)
		}
		if err := notCovered("binary", b); err != nil {
			return o, fmt.Errorf("options: %w", err)
		}
	}
	for _, img := range o.Images {
		if _, err := os.Stat(img); err != nil {
			return o, fmt.Errorf("options: image: %w", err)
		}
	}
	if o.PauseImage == "" {
		o.PauseImage = DefaultPauseImage
	}
	if o.Zone == nil {
		o.Zone = DefaultZone
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	return o, nil
}

// notCovered refuses a path that a node would not see as the host has it.
func notCovered(what, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for _, c := range coveredPaths {
		if abs == c || strings.HasPrefix(abs, c+"/") {
			return fmt.Errorf("%s %s: under %s, which every node replaces with its own", what, path, c)
		}
	}
	return nil
}
