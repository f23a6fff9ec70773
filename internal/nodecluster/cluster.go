package nodecluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/atomicfile"
	"github.com/svcnet/svcnet/internal/kubecluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// Cluster is a running cluster, made by Up. Its methods are safe for
// concurrent use once Up has returned.
type Cluster struct {
	// Name and Dir are Options.Name and Options.Dir.
	Name, Dir string
	// Kubeconfig is an admin kubeconfig (system:masters) whose server is
	// APIServer: reachable from the control-plane namespace (Command) and the
	// nodes, not from the host's namespace.
	Kubeconfig string
	// APIServer is https://172.26.236.176:6443.
	APIServer string
	// Config and Client talk to the apiserver as the admin user, dialing from
	// inside the control-plane namespace.
	Config *rest.Config
	Client kubernetes.Interface
	// Nodes are the nodes, node1 first.
	Nodes []Node
	// ControlPlaneNetNS is the name of the control plane's network namespace
	// (NAME.cp, address ControlPlaneAddr on the node network): etcd, the
	// apiserver, the controller manager and the scheduler run there, and
	// Command runs commands there.
	ControlPlaneNetNS string
	ControlPlaneAddr  netip.Addr

	o     Options
	l     layout
	v2    string   // the cgroup2 hierarchy's mount point
	hier  []string // every cgroup hierarchy's mount point
	cp    *kubecluster.Cluster
	cpNS  *netns.NS
	fab   *netns.NS
	nodes []*node
}

// contextLines is how many lines of every log a failed Up's error carries,
// besides the failing process's logLines.
const contextLines = 15

// stateFile marks Dir as a cluster's and records what it is.
const stateFile = "nodecluster.json"

type state struct {
	Name          string `json:"name"`
	Nodes         []Node `json:"nodes"`
	K8sBin        string `json:"k8sBin"`
	ContainerdBin string `json:"containerdBin"`
}

// Up brings a cluster up (see the package doc) and waits, each wait bounded by
// Options.ReadyTimeout and ctx, until every Node is Ready. A leftover of a
// cluster of the same name is removed first (Down). On failure it removes
// what it made and returns an error with the tails of the logs.
func Up(ctx context.Context, o Options) (*Cluster, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("nodecluster: %w", err)
	}
	if err := Down(o.Name, o.Dir); err != nil {
		return nil, fmt.Errorf("nodecluster %s: leftover: %w", o.Name, err)
	}
	c := &Cluster{
		Name: o.Name, Dir: o.Dir, Nodes: nodesOf(o),
		ControlPlaneNetNS: topology.Names{Lab: o.Name}.Control(),
		ControlPlaneAddr:  topology.ControlAddr,
		APIServer:         fmt.Sprintf("https://%s:%d", topology.ControlAddr, kubecluster.DefaultPorts.APIServer),
		o:                 o, l: layout{name: o.Name, dir: o.Dir},
	}
	if err := c.up(ctx); err != nil {
		logs := c.Logs(contextLines)
		c.closeNS()
		if derr := Down(o.Name, o.Dir); derr != nil {
			err = fmt.Errorf("%w; removing it: %w", err, derr)
		}
		return nil, fmt.Errorf("nodecluster %s: %w\n%s", o.Name, err, logs)
	}
	return c, nil
}

func (c *Cluster) up(ctx context.Context) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	st := state{Name: c.Name, Nodes: c.Nodes, K8sBin: c.o.K8sBin, ContainerdBin: c.o.ContainerdBin}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(c.Dir, stateFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if c.hier, c.v2, err = cgroupMounts(); err != nil {
		return err
	}
	if err := makeCgroup([]string{c.v2}, c.l.cgroupCP()); err != nil {
		return err
	}
	names := c.l.names()
	if c.fab, err = makeFabric(names.Fabric(), c.Nodes); err != nil {
		return err
	}
	if c.cpNS, err = topology.Attach(c.fab, names.Control(), "cp", []netip.Addr{topology.ControlAddr}, false); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		nd := &node{Node: n, dir: c.l.nodeDir(n.Name), cgroup: filepath.Join(c.v2, c.l.cgroupDaemons(n.Name))}
		c.nodes = append(c.nodes, nd)
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			return err
		}
		if err := makeCgroup(c.hier, c.l.cgroupNode(n.Name)); err != nil {
			return err
		}
		if err := makeCgroup([]string{c.v2}, c.l.cgroupDaemons(n.Name)); err != nil {
			return err
		}
		if nd.ns, err = topology.Attach(c.fab, n.NetNS, n.Name, []netip.Addr{n.Addr}, true); err != nil {
			return err
		}
	}

	// The control plane and the nodes' runtimes come up side by side.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.startControlPlane(gctx) })
	for _, n := range c.nodes {
		g.Go(func() error { return c.startRuntime(gctx, n) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := c.createNodes(ctx); err != nil {
		return err
	}
	g, gctx = errgroup.WithContext(ctx)
	for _, n := range c.nodes {
		g.Go(func() error { return c.startKubelet(gctx, n) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if c.o.CNIPlugin == "" {
		// Not Ready before a CNI network is installed: the kubelets' first
		// status is what there is to wait for.
		return c.waitRegistered(ctx, c.o.ReadyTimeout)
	}
	return c.WaitReady(ctx, c.o.ReadyTimeout)
}

// startRuntime prepares a node and starts its holder and containerd, and
// imports the images.
func (c *Cluster) startRuntime(ctx context.Context, n *node) error {
	if err := c.prepare(n); err != nil {
		return err
	}
	if err := startHolder(ctx, n, c.o.Detach, c.o.ReadyTimeout); err != nil {
		return err
	}
	if err := c.startContainerd(ctx, n); err != nil {
		return err
	}
	for _, img := range c.o.Images {
		if err := c.importImage(ctx, n, img); err != nil {
			return err
		}
	}
	return nil
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager
// (every default controller, node pod CIDRs from the pod network) and
// kube-scheduler in the control-plane namespace (kubecluster).
func (c *Cluster) startControlPlane(ctx context.Context) error {
	cpCgroup := filepath.Join(c.v2, c.l.cgroupCP())
	ns := c.ControlPlaneNetNS
	o := kubecluster.Options{
		Dir:                   c.l.cpDir(),
		BinDir:                c.o.K8sBin,
		EtcdBin:               c.o.EtcdBin,
		ControllerManager:     true,
		Controllers:           []string{"*"},
		ServiceAccounts:       true,
		Scheduler:             true,
		ServiceClusterIPRange: topology.ServiceRange.String(),
		AdvertiseAddress:      topology.ControlAddr.String(),
		BindAddress:           "0.0.0.0",
		Ports:                 kubecluster.DefaultPorts,
		ServerURL:             c.APIServer,
		Detach:                c.o.Detach,
		Dial:                  kubecluster.DialFunc(netns.Dialer(c.cpNS)),
		Command: func(name string, args ...string) *exec.Cmd {
			argv := joinCgroupArgv(cpCgroup, netns.NetInArgv(ns, append([]string{name}, args...)...)...)
			return exec.Command(argv[0], argv[1:]...)
		},
		APIServerFlags: []string{
			"--allow-privileged=true",
			// Never a node's name: it would be resolved with the host's resolver.
			"--kubelet-preferred-address-types=InternalIP",
		},
		ControllerManagerFlags: []string{
			"--allocate-node-cidrs=true",
			"--cluster-cidr=" + topology.PodNetwork.String(),
			"--node-cidr-mask-size=24",
			"--service-cluster-ip-range=" + topology.ServiceRange.String(),
		},
		ReadyTimeout: c.o.ReadyTimeout,
	}
	cp, err := kubecluster.Start(ctx, o)
	if err != nil {
		return err
	}
	return c.useControlPlane(cp)
}

// useControlPlane makes cp the cluster's control plane (started or attached
// to): its kubeconfig, and a client of the cluster's own user agent.
func (c *Cluster) useControlPlane(cp *kubecluster.Cluster) error {
	c.cp = cp
	c.Kubeconfig = cp.Kubeconfig
	c.Config = rest.CopyConfig(cp.Config)
	c.Config.UserAgent = "nodecluster"
	var err error
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}

// createNodes creates the Node objects before their kubelets register them,
// with the pod CIDR of the lab's plan (node i: 192.168.i.0/24; the controller
// manager's allocator keeps a CIDR a Node has) and the zone label, and, with
// Options.CNIPlugin, installs the plugin on each node for its Node.
func (c *Cluster) createNodes(ctx context.Context) error {
	for i, n := range c.Nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: n.Name,
				Labels: map[string]string{
					corev1.LabelHostname:     n.Name,
					corev1.LabelTopologyZone: n.Zone,
				},
			},
			Spec: corev1.NodeSpec{PodCIDR: n.PodCIDR.String(), PodCIDRs: []string{n.PodCIDR.String()}},
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		created, err := c.Client.CoreV1().Nodes().Create(cctx, node, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("Node %s: %w", n.Name, err)
		}
		if c.o.CNIPlugin != "" {
			if err := installCNI(c.o.CNIPlugin, fsDir(c.nodes[i].dir), created); err != nil {
				return err
			}
		}
	}
	return nil
}

// WaitReady waits up to timeout until every Node is Ready; the error names
// each Node that is not, with its Ready condition and its kubelet's log tail.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	notReady := func(ctx context.Context) error {
		var bad []string
		for _, n := range c.Nodes {
			got, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", n.Name, err))
				continue
			}
			if cond := readyCondition(got); cond == nil || cond.Status != corev1.ConditionTrue {
				msg := "no Ready condition"
				if cond != nil {
					msg = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
				}
				bad = append(bad, n.Name+": "+msg)
			}
		}
		if len(bad) > 0 {
			return errors.New(strings.Join(bad, "; "))
		}
		return nil
	}
	err := waitUntil(ctx, timeout, "Nodes Ready", nil, notReady)
	if err != nil {
		var tails []string
		for _, n := range c.nodes {
			if n.kubelet != nil {
				tails = append(tails, n.kubelet.logTail(logLines))
			}
		}
		return fmt.Errorf("%w\n%s", err, strings.Join(tails, "\n"))
	}
	return nil
}

// waitRegistered waits up to timeout until every kubelet has posted its
// Node's status.
func (c *Cluster) waitRegistered(ctx context.Context, timeout time.Duration) error {
	return waitUntil(ctx, timeout, "Nodes registered", nil, func(ctx context.Context) error {
		for _, n := range c.Nodes {
			got, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			if got.Status.NodeInfo.KubeletVersion == "" || readyCondition(got) == nil {
				return fmt.Errorf("%s: no status from its kubelet", n.Name)
			}
		}
		return nil
	})
}

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// Command returns a command, killed when ctx ends, that runs argv in the
// control-plane namespace with the host's files (the host's mount namespace):
// it reaches the apiserver at APIServer, the nodes and the Pods, as e2e.test
// and kubectl need.
func (c *Cluster) Command(ctx context.Context, argv ...string) *exec.Cmd {
	return netns.CommandNetIn(ctx, c.ControlPlaneNetNS, argv...)
}

// Kubectl returns a command that runs kubectl (from Options.K8sBin, which must
// hold it) with the admin kubeconfig in the control-plane namespace.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) *exec.Cmd {
	return c.Command(ctx, append([]string{filepath.Join(c.o.K8sBin, "kubectl"), "--kubeconfig=" + c.Kubeconfig}, args...)...)
}

// NodeCommand returns a command, killed when ctx ends, that runs argv inside
// the node's namespaces (mount, UTS, network): it sees the node's files, as
// its kubelet and containerd do.
func (c *Cluster) NodeCommand(ctx context.Context, node string, argv ...string) (*exec.Cmd, error) {
	n, err := c.node(node)
	if err != nil {
		return nil, err
	}
	if n.holder == nil || n.holder.exited() != nil {
		return nil, fmt.Errorf("node %s: %w", node, errNoHolder)
	}
	a := nodeArgv(n.holder.pid, "/", argv...)
	return exec.CommandContext(ctx, a[0], a[1:]...), nil
}

// NodeByName returns the node called name.
func (c *Cluster) NodeByName(name string) (Node, bool) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

func (c *Cluster) node(name string) (*node, error) {
	for _, n := range c.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("nodecluster %s: no node %q", c.Name, name)
}

// ImportImage imports an image tarball into every node's containerd
// (namespace k8s.io), the nodes side by side.
func (c *Cluster) ImportImage(ctx context.Context, tarball string) error {
	var g errgroup.Group
	for _, n := range c.nodes {
		g.Go(func() error { return c.importImage(ctx, n, tarball) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("nodecluster %s: %w", c.Name, err)
	}
	return nil
}

// Logs returns the tail (n lines) of every log: the control plane's
// components, then each node's holder, containerd and kubelet.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	b.WriteString(kubecluster.Logs(c.l.cpDir(), n))
	for _, nd := range c.nodes {
		for _, d := range nd.daemons() {
			b.WriteString(d.logTail(n))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Down stops everything and removes everything the cluster made (Down).
func (c *Cluster) Down() error {
	c.closeNS()
	return Down(c.Name, c.Dir)
}

// Close releases what the Cluster value holds (its namespaces' descriptors)
// and leaves the cluster running.
func (c *Cluster) Close() { c.closeNS() }

func (c *Cluster) closeNS() {
	for _, ns := range []*netns.NS{c.fab, c.cpNS} {
		if ns != nil {
			ns.Close()
		}
	}
	for _, n := range c.nodes {
		if n.ns != nil {
			n.ns.Close()
		}
	}
}
