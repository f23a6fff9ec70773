package nodecluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/cni/install"
	"github.com/svcnet/svcnet/internal/httpserve"
	"github.com/svcnet/svcnet/internal/image"
	"github.com/svcnet/svcnet/internal/netns"
)

// node is one node being run: its namespace holder, containerd and kubelet.
type node struct {
	Node
	dir    string // the node's directory
	cgroup string // the cgroup2 directory of its daemons
	ns     *netns.NS

	holder, containerd, kubelet *daemon
}

func (n *node) configPath(name string) string { return filepath.Join(n.dir, name) }
func (n *node) logPath(name string) string    { return filepath.Join(n.dir, name+".log") }

// prepare writes the node's files: its file systems (mounts.go) and
// containerd's and the kubelet's configuration.
func (c *Cluster) prepare(n *node) error {
	if err := prepareNodeFS(n.dir, n.Node); err != nil {
		return err
	}
	if err := os.WriteFile(n.configPath("containerd.toml"), []byte(containerdConfig(c.o.Runc, c.o.PauseImage)), 0o644); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	kc, err := kubeletConfig(c.l.cgroupNode(n.Name))
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.configPath("kubelet.yaml"), kc, 0o644); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// cniVersion is the conflist's cniVersion: containerd 2.x reads CNI 1.1.0
// results.
const cniVersion = "1.1.0"

// installCNI puts svcnet's CNI plugin on the node as `svcnet cni install`
// does (internal/cni/install): the binary (as svcnet and loopback) into its
// CNI bin dir, and the conflist of its Node's pod CIDRs into its CNI conf
// dir, through the node's directory.
func installCNI(plugin, fs string, node *corev1.Node) error {
	conf, _, _, err := install.NodeConfList(node, cniVersion)
	if err != nil {
		return fmt.Errorf("node %s: CNI conflist: %w", node.Name, err)
	}
	in := install.New(install.Options{
		Source:   plugin,
		BinDir:   filepath.Join(fs, "opt/cni/bin"),
		ConfDir:  filepath.Join(fs, "cni-net.d"),
		ConfName: install.DefaultConfName,
	})
	if _, err := in.Install(conf); err != nil {
		return fmt.Errorf("node %s: CNI install: %w", node.Name, err)
	}
	return nil
}

// startHolder starts the node's namespace holder (mounts.go) inside its
// network namespace, in the cgroup n.cgroup, and waits up to timeout until its
// mounts are made.
func startHolder(ctx context.Context, n *node, detach bool, timeout time.Duration) error {
	fs := fsDir(n.dir)
	argv := joinCgroupArgv(n.cgroup, netns.NetInArgv(n.NetNS,
		"unshare", "--mount", "--uts", "--propagation", "private", "--",
		"/bin/sh", "-c", holderScript, "holder", fs, n.Name)...)
	d, err := startDaemon(n.Name+" holder", n.logPath("holder"), detach, nil, argv)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.holder = d
	if err := os.WriteFile(n.configPath("holder.pid"), []byte(strconv.Itoa(d.pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return waitUntil(ctx, timeout, "node "+n.Name+": mounts", d, func(context.Context) error {
		_, err := os.Stat(filepath.Join(fs, "ready"))
		return err
	})
}

// daemonEnv is the environment of a node's containerd and kubelet: containerd
// finds its shim first on PATH, and temporary files stay in the node's dir.
func (c *Cluster) daemonEnv(n *node) []string {
	return []string{
		"PATH=" + c.o.ContainerdBin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"TMPDIR=" + filepath.Join(fsDir(n.dir), "tmp"),
	}
}

// startContainerd starts the node's containerd and waits until its socket
// accepts connections.
func (c *Cluster) startContainerd(ctx context.Context, n *node) error {
	argv := joinCgroupArgv(n.cgroup, nodeArgv(n.holder.pid, n.dir,
		filepath.Join(c.o.ContainerdBin, "containerd"), "--config", n.configPath("containerd.toml"))...)
	d, err := startDaemon(n.Name+" containerd", n.logPath("containerd"), c.o.Detach, c.daemonEnv(n), argv)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.containerd = d
	sock := n.socket()
	return waitUntil(ctx, c.o.ReadyTimeout, "node "+n.Name+": containerd", d, func(ctx context.Context) error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// importImage imports the image tarball into the node's containerd
// (image.Import: namespace k8s.io, as the kubelet's images), through the
// node's socket as the holder's root shows it.
func (c *Cluster) importImage(ctx context.Context, n *node, tarball string) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.ReadyTimeout)
	defer cancel()
	if err := image.Import(ctx, filepath.Join(c.o.ContainerdBin, "ctr"), n.socket(), tarball); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// socket is the path of the node's containerd socket in the host's mount
// namespace: the node's /run is its own, seen through its holder's root.
func (n *node) socket() string {
	return fmt.Sprintf("/proc/%d/root%s", n.holder.pid, containerdSocket)
}

// startKubelet starts the node's kubelet and waits until its /healthz passes.
func (c *Cluster) startKubelet(ctx context.Context, n *node) error {
	argv := joinCgroupArgv(n.cgroup, nodeArgv(n.holder.pid, n.dir,
		filepath.Join(c.o.K8sBin, "kubelet"),
		"--config="+n.configPath("kubelet.yaml"),
		"--kubeconfig="+c.Kubeconfig,
		"--hostname-override="+n.Name,
		"--node-ip="+n.Addr.String(),
		"--v=1",
	)...)
	d, err := startDaemon(n.Name+" kubelet", n.logPath("kubelet"), c.o.Detach, c.daemonEnv(n), argv)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.kubelet = d
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(n.ns), DisableKeepAlives: true}}
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeletHealthzPort)
	return waitUntil(ctx, c.o.ReadyTimeout, "node "+n.Name+": kubelet /healthz", d, func(ctx context.Context) error {
		return httpserve.CheckOK(ctx, hc, url)
	})
}

// daemons are the node's started daemons, in start order.
func (n *node) daemons() []*daemon {
	var out []*daemon
	for _, d := range []*daemon{n.holder, n.containerd, n.kubelet} {
		if d != nil {
			out = append(out, d)
		}
	}
	return out
}

// errNoHolder is NodeCommand's error for a node whose holder is not running.
var errNoHolder = errors.New("its namespaces are not held (node not started, or stopped)")
