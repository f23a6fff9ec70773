package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/nodecluster"
)

// envContainerdBin names the directory of containerd, ctr and
// containerd-shim-runc-v2 (tools/containerd/build.sh prints it).
const envContainerdBin = "SVCNET_CONTAINERD_BIN"

// kubeletLabDir is the state directory of the node cluster of lab name: not
// under /run, /var/lib or /var/log, which every node replaces with its own.
func kubeletLabDir(name string) string { return "/var/tmp/svcnet-lab." + name }

// kubeletLabOptions are `lab up --kubelet`'s own flags.
type kubeletLabOptions struct {
	enabled       bool
	containerdBin string
	images        []string
}

func (k *kubeletLabOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&k.enabled, "kubelet", false, "real nodes: each node runs containerd (with runc) and a kubelet, under kube-apiserver, kube-controller-manager and kube-scheduler; svcnet's CNI plugin wires the Pods (internal/nodecluster)")
	f.StringVar(&k.containerdBin, "containerd-bin", "", "with --kubelet: directory of containerd, ctr and containerd-shim-runc-v2 (default $"+envContainerdBin+")")
	f.StringSliceVar(&k.images, "image", nil, "with --kubelet: image archive to import into every node (repeatable); registry.k8s.io/pause:3.10.2 must be among them")
}

// upKubeletLab brings up the node cluster of lab name, detached, and says how
// to use it.
func upKubeletLab(ctx context.Context, out io.Writer, name string, nodes int, k8sBin string, k kubeletLabOptions) error {
	if k8sBin == "" {
		k8sBin = os.Getenv(envK8sBin)
	}
	if k.containerdBin == "" {
		k.containerdBin = os.Getenv(envContainerdBin)
	}
	if k8sBin == "" || k.containerdBin == "" {
		return fmt.Errorf("lab up --kubelet: give --k8s-bin (or $%s: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl) and --containerd-bin (or $%s)", envK8sBin, envContainerdBin)
	}
	if len(k.images) == 0 {
		return errors.New("lab up --kubelet: give at least the pause image with --image (nothing is pulled)")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lab up --kubelet: the CNI plugin (this binary): %w", err)
	}
	// A leftover lab of the name goes first (its namespaces would be taken
	// for the cluster's, its files would stay); nodecluster.Up removes a
	// leftover cluster of real nodes itself.
	if err := lab.Down(name); err != nil {
		return fmt.Errorf("lab up --kubelet: leftover lab %s: %w", name, err)
	}
	dir := kubeletLabDir(name)
	start := time.Now()
	c, err := nodecluster.Up(ctx, nodecluster.Options{
		Name: name, Dir: dir, Nodes: nodes, K8sBin: k8sBin, ContainerdBin: k.containerdBin,
		CNIPlugin: self, Images: k.images, Detach: true,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	kubectl := filepath.Join(k8sBin, "kubectl")
	nodesWord := "nodes"
	if len(c.Nodes) == 1 {
		nodesWord = "node"
	}
	fmt.Fprintf(out, `lab %s: %d %s Ready in %v (kubelet, containerd, runc; svcnet's CNI plugin)
  state:      %s
  apiserver:  %s, inside the lab (control-plane namespace %s)
  kubeconfig: %s
  kubectl:    ip netns exec %s %s --kubeconfig %s get nodes -o wide
  remove:     svcnet lab down --name %s
`, name, len(c.Nodes), nodesWord, time.Since(start).Round(100*time.Millisecond), dir, c.APIServer, c.ControlPlaneNetNS,
		c.Kubeconfig, c.ControlPlaneNetNS, kubectl, c.Kubeconfig, name)
	return nil
}

// downKubeletLab removes the node cluster of lab name, if there is one.
func downKubeletLab(name string) error {
	if err := topology.ValidateName(name); err != nil {
		return err
	}
	dir := kubeletLabDir(name)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return nodecluster.Down(name, dir)
}
