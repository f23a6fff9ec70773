package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/cni/install"
	"github.com/svcnet/svcnet/internal/source/kube"
)

// Defaults of `svcnet cni install`'s waits.
const (
	defaultPodCIDRWait  = 5 * time.Minute
	defaultResyncPeriod = 30 * time.Second
	podCIDRPollInterval = 2 * time.Second
	defaultCallTimeout  = 30 * time.Second
	nodeNameEnv         = "NODE_NAME"
)

// cniDirFlags are the node's CNI directories, shared by install and uninstall.
type cniDirFlags struct {
	binDir, confDir string
}

func (f *cniDirFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.binDir, "cni-bin-dir", install.DefaultBinDir, "the node's CNI bin dir (the runtime's CNI_PATH)")
	cmd.Flags().StringVar(&f.confDir, "cni-conf-dir", install.DefaultConfDir, "the node's CNI conf dir")
}

type cniInstallOptions struct {
	dirs         cniDirFlags
	kubeconfig   string
	nodeName     string
	source       string
	confName     string
	cniVersion   string
	podCIDRWait  time.Duration
	pollInterval time.Duration
	watch        bool
	resyncPeriod time.Duration
}

func newCNIInstallCommand() *cobra.Command {
	o := &cniInstallOptions{pollInterval: podCIDRPollInterval}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the CNI plugin and this node's conflist (an init container's job)",
		Long: `svcnet cni install puts svcnet's CNI plugin on this node, as flannel's and
Calico's install containers do: it copies the svcnet binary into --cni-bin-dir
as svcnet, and as loopback (the binary is the loopback plugin under that name)
unless another plugin's loopback is there; it writes --conf-file-name into
--cni-conf-dir from the Node's spec.podCIDRs (both families on a dual-stack
Node), waiting up to --pod-cidr-timeout for the Node to get one; and it records
what it wrote in svcnet-cni.installed beside the conflist, so that
svcnet cni uninstall removes exactly that. Every file is replaced atomically
and only when its content changes.

--cni-version auto writes 1.1.0 for containerd 2.x and CRI-O 1.31+, and 1.0.0
for containerd 1.x (whose CNI library parses results up to 1.0.0) and any other
runtime, read from the Node's status.nodeInfo.containerRuntimeVersion.

The Node is --node-name, else $NODE_NAME; the API server is reached with the
in-cluster configuration in a Pod, else --kubeconfig. Without --watch it exits
0 once installed (an init container). With --watch it stays, checking the Node
and the files every --resync-period and repairing what changed; it removes
nothing when it stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.dirs.bind(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: the in-cluster configuration in a Pod)")
	fs.StringVar(&o.nodeName, "node-name", os.Getenv(nodeNameEnv), "the Node this runs on (default $"+nodeNameEnv+")")
	fs.StringVar(&o.source, "source", "", "the binary to install (default: the running svcnet binary)")
	fs.StringVar(&o.confName, "conf-file-name", install.DefaultConfName, "the conflist's file name in --cni-conf-dir")
	fs.StringVar(&o.cniVersion, "cni-version", install.VersionAuto, "the conflist's cniVersion: auto (from the Node's container runtime), 1.0.0 or 1.1.0")
	fs.DurationVar(&o.podCIDRWait, "pod-cidr-timeout", defaultPodCIDRWait, "how long to wait for the Node to have a pod CIDR")
	fs.BoolVar(&o.watch, "watch", false, "stay running and keep the files in sync with the Node")
	fs.DurationVar(&o.resyncPeriod, "resync-period", defaultResyncPeriod, "with --watch: how often to check the Node and the files")
	return cmd
}

func (o *cniInstallOptions) run(cmd *cobra.Command) error {
	if err := install.ValidateNodeName(o.nodeName); err != nil {
		return err
	}
	if _, _, err := install.ChooseCNIVersion(o.cniVersion, ""); err != nil {
		return err
	}
	if o.podCIDRWait <= 0 || o.resyncPeriod <= 0 {
		return fmt.Errorf("--pod-cidr-timeout and --resync-period must be positive")
	}
	src := o.source
	if src == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("the running binary: %w (give --source)", err)
		}
		src = exe
	}
	opts := install.Options{Source: src, BinDir: o.dirs.binDir, ConfDir: o.dirs.confDir, ConfName: o.confName}
	if err := opts.Validate(); err != nil {
		return err
	}
	c, err := kube.NewClient(o.kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(cmd)
	defer cancel()
	out := cmd.OutOrStdout()
	in := install.New(opts)

	node, _, err := install.WaitForPodCIDRs(ctx, c, o.nodeName, o.podCIDRWait, o.pollInterval)
	if err != nil {
		return err
	}
	if err := o.sync(in, node, out, true); err != nil {
		return err
	}
	if !o.watch {
		return nil
	}
	t := time.NewTicker(o.resyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		node, err := getNode(ctx, c, o.nodeName)
		if err == nil {
			err = o.sync(in, node, out, false)
		}
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "svcnet cni install: %v (retrying in %v)\n", err, o.resyncPeriod)
		}
	}
}

func getNode(ctx context.Context, c kubernetes.Interface, name string) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, defaultCallTimeout)
	defer cancel()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return n, nil
}

// sync installs from node and reports on out: everything the first time,
// only changes afterwards.
func (o *cniInstallOptions) sync(in *install.Installer, node *corev1.Node, out io.Writer, first bool) error {
	conflist, version, reason, err := install.NodeConfList(node, o.cniVersion)
	if err != nil {
		return err
	}
	res, err := in.Install(conflist)
	changed := len(res.Written) > 0 || len(res.Removed) > 0
	if first || changed {
		fmt.Fprintf(out, "node %s: cniVersion %s (%s)\n", node.Name, version, reason)
		for _, p := range res.Written {
			fmt.Fprintf(out, "wrote %s\n", p)
		}
		for _, p := range res.Unchanged {
			fmt.Fprintf(out, "unchanged %s\n", p)
		}
		for _, p := range res.Removed {
			fmt.Fprintf(out, "removed %s\n", p)
		}
		for _, n := range res.Notes {
			fmt.Fprintf(out, "note: %s\n", n)
		}
	}
	return err
}

func newCNIUninstallCommand() *cobra.Command {
	var dirs cniDirFlags
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what svcnet cni install wrote on this node, and nothing else",
		Long: `svcnet cni uninstall removes the files svcnet cni install recorded in
--cni-conf-dir/svcnet-cni.installed (the conflist first, then the binaries),
each only while it holds the content install wrote there: a file someone
replaced since is left and reported. Without that record it removes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := install.Options{BinDir: dirs.binDir, ConfDir: dirs.confDir, ConfName: install.DefaultConfName}
			if err := opts.Validate(); err != nil {
				return err
			}
			res, err := install.New(opts).Uninstall()
			out := cmd.OutOrStdout()
			if !res.Manifest && err == nil {
				fmt.Fprintf(out, "nothing recorded in %s: nothing removed\n", dirs.confDir)
			}
			for _, p := range res.Removed {
				fmt.Fprintf(out, "removed %s\n", p)
			}
			for _, l := range res.Left {
				fmt.Fprintf(out, "left %s\n", l)
			}
			return err
		},
	}
	dirs.bind(cmd)
	return cmd
}
