package lab

import (
	"context"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// Lab is one lab that is up, opened by a lab command. Methods that change it run
// under the lab's lock, taken by Open and Up and released by Close.
type Lab struct {
	names   topology.Names
	info    *Info
	cluster cluster
	unlock  func()
}

// Options configure Up.
type Options struct {
	Name  string
	Nodes int
	// ControlPlane is ControlPlaneFile (default) or ControlPlaneKube.
	ControlPlane string
	// Binary is the svcnet binary the lab's processes run; default this one.
	Binary string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// ProxyArgs are extra flags for every node's svcnet proxy.
	ProxyArgs []string
	// K8sBin is the directory of kube-apiserver, kube-controller-manager and
	// kube-proxy, for ControlPlaneKube; default $SVCNET_K8S_BIN.
	K8sBin string
	// Proxy is the nodes' Service proxy: ProxySvcnet (default), or upstream
	// kube-proxy, ProxyKubeProxyNFTables or ProxyKubeProxyIPTables, which need
	// ControlPlaneKube. Beside kube-proxy every node still runs svcnet proxy
	// --data-plane none for the pod routes and the layer-2 speaker.
	Proxy string
}

// Open opens a lab that is up, taking its lock until Close.
func Open(ctx context.Context, name string) (*Lab, error) {
	if err := topology.ValidateName(name); err != nil {
		return nil, err
	}
	n := topology.Names{Lab: name}
	unlock, err := lock(n)
	if err != nil {
		return nil, err
	}
	info, err := readInfo(n)
	if err != nil {
		unlock()
		return nil, err
	}
	l := &Lab{names: n, info: info, unlock: unlock}
	if l.cluster, err = openCluster(ctx, n, info); err != nil {
		unlock()
		return nil, err
	}
	return l, nil
}

// Close releases the lab's lock. The lab stays up.
func (l *Lab) Close() {
	if l.unlock != nil {
		l.unlock()
		l.unlock = nil
	}
}

// Info returns what the lab remembers about itself.
func (l *Lab) Info() Info { return *l.info }

// Names returns the lab's names.
func (l *Lab) Names() topology.Names { return l.names }

func openCluster(ctx context.Context, n topology.Names, info *Info) (cluster, error) {
	switch info.ControlPlane {
	case ControlPlaneFile, "":
		return newFileCluster(n), nil
	case ControlPlaneKube:
		return attachKubeCluster(ctx, n)
	}
	return nil, fmt.Errorf("lab %s: unknown control plane %q", n.Lab, info.ControlPlane)
}

// Up builds the lab (see the package doc) and returns it open. A leftover lab of
// the same name is removed first. On failure everything made is removed again.
func Up(ctx context.Context, o Options) (_ *Lab, err error) {
	if o.Name == "" {
		o.Name = "svcnet"
	}
	if err := topology.ValidateName(o.Name); err != nil {
		return nil, err
	}
	if o.Nodes < 1 || o.Nodes > topology.MaxNodes {
		return nil, fmt.Errorf("lab %s: --nodes %d: want 1 to %d", o.Name, o.Nodes, topology.MaxNodes)
	}
	if o.ControlPlane == "" {
		o.ControlPlane = ControlPlaneFile
	}
	if o.ControlPlane != ControlPlaneFile && o.ControlPlane != ControlPlaneKube {
		return nil, fmt.Errorf("lab %s: --control-plane %q: want %s or %s", o.Name, o.ControlPlane, ControlPlaneFile, ControlPlaneKube)
	}
	if o.Proxy == "" {
		o.Proxy = ProxySvcnet
	}
	if err := checkProxy(o.Name, o.Proxy, o.ControlPlane); err != nil {
		return nil, err
	}
	if o.ControlPlane == ControlPlaneKube && o.K8sBin == "" {
		if o.K8sBin = os.Getenv(EnvK8sBin); o.K8sBin == "" {
			return nil, fmt.Errorf("lab %s: --control-plane kube needs kube-apiserver and kube-controller-manager: give --k8s-bin DIR or set %s (`make k8s` builds them; tools/k8s/build.sh prints the directory)", o.Name, EnvK8sBin)
		}
	}
	if err := checkKubeProxyBinary(o.Name, o.Proxy, o.K8sBin); err != nil {
		return nil, err
	}
	if o.Binary == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("lab %s: svcnet binary: %w", o.Name, err)
		}
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	n := topology.Names{Lab: o.Name}
	unlock, err := lock(n)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			progress("failed: %v; removing what was built", err)
			_ = topology.Remove(n)
			unlock()
		}
	}()
	if left, _ := topology.Leftovers(n); left {
		progress("removing the leftover lab %q", n.Lab)
		if err := topology.Remove(n); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{n.Dir(), n.Path("logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("lab %s: %w", n.Lab, err)
		}
	}
	info := &Info{Name: n.Lab, Nodes: o.Nodes, ControlPlane: o.ControlPlane, Binary: o.Binary, ProxyArgs: o.ProxyArgs,
		Proxy: o.Proxy, K8sBin: o.K8sBin}
	if err := writeInfo(n, info); err != nil {
		return nil, err
	}
	if err := writeHeartbeatKey(n); err != nil {
		return nil, err
	}
	l := &Lab{names: n, info: info, unlock: unlock}

	progress("fabric: namespace %s, bridge %s for the node network %s", n.Fabric(), topology.FabricBridge, topology.NodeNetwork)
	fabric, err := topology.MakeFabric(n.Fabric())
	if err != nil {
		return nil, err
	}
	defer fabric.Close()
	progress("client: namespace %s, %s", n.Client(), topology.ClientAddr)
	client, err := topology.Attach(fabric, n.Client(), "client", topology.ClientAddr, false)
	if err != nil {
		return nil, err
	}
	client.Close()
	for i := 1; i <= o.Nodes; i++ {
		progress("node %s: namespace %s, %s, pods %s", topology.NodeName(i), n.Node(i), topology.NodeAddr(i), topology.PodCIDR(i))
		ns, err := topology.Attach(fabric, n.Node(i), topology.NodeName(i), topology.NodeAddr(i), true)
		if err != nil {
			return nil, err
		}
		ns.Close()
		if err := topology.WriteNodeEtc(n, i); err != nil {
			return nil, err
		}
	}
	if err := topology.InstallCNI(n, o.Binary, o.Nodes); err != nil {
		return nil, err
	}
	if o.ControlPlane == ControlPlaneKube {
		progress("control plane: etcd, kube-apiserver and kube-controller-manager in %s at %s", n.Control(), topology.ControlAddr)
		kc, err := startKubeCluster(ctx, n, fabric, o.K8sBin)
		if err != nil {
			return nil, err
		}
		l.cluster = kc
		// Pods reach the API server directly (svcnet dns watches it), as in a
		// cluster whose control plane is routed to the pod network.
		if err := topology.RoutePodCIDRs(n.Control(), o.Nodes); err != nil {
			return nil, err
		}
		progress("control plane: svcnet lb controller in %s", n.Control())
		if err := l.installLB(ctx, kc); err != nil {
			return nil, fmt.Errorf("lab %s: svcnet lb: %w", n.Lab, err)
		}
	} else {
		progress("control plane: svcnet's embedded control plane, publishing %s", newFileCluster(n).publishPath())
		l.cluster = newFileCluster(n)
	}
	nodes := make([]*corev1.Node, o.Nodes)
	for i := range nodes {
		nodes[i] = labNode(i + 1)
	}
	if err := l.cluster.RegisterNodes(ctx, nodes); err != nil {
		return nil, fmt.Errorf("lab %s: register nodes: %w", n.Lab, err)
	}
	progress("load balancer: pool %s (%s), layer-2 speakers in every node's proxy", PoolName, PoolRange)
	if err := l.applyDefaultPool(ctx); err != nil {
		return nil, err
	}
	progress("cluster DNS: Service %s/%s at %s, svcnet dns in pod %s/%s on %s", DNSNamespace, DNSService, topology.ClusterDNS, DNSNamespace, DNSPod, topology.NodeName(1))
	if err := l.startClusterDNS(ctx); err != nil {
		return nil, err
	}
	if err := l.startNodes(ctx, progress); err != nil {
		return nil, err
	}
	if err := l.waitClusterDNS(ctx); err != nil {
		return nil, err
	}
	progress("lab %q is up: %d nodes, client %s", n.Lab, o.Nodes, topology.ClientAddr)
	return l, nil
}

// labNode is node i as a kubelet registers it.
func labNode(i int) *corev1.Node {
	name := topology.NodeName(i)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
		}},
		Spec: corev1.NodeSpec{PodCIDR: topology.PodCIDR(i).String(), PodCIDRs: []string{topology.PodCIDR(i).String()}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: topology.NodeAddr(i).String()},
				{Type: corev1.NodeHostName, Address: name},
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
}

// Down removes the lab named name: every process in its namespaces, the
// namespaces, its /etc/netns files and its state. It is idempotent and needs
// nothing but the names, so it works after a crash.
func Down(name string) error {
	if err := topology.ValidateName(name); err != nil {
		return err
	}
	n := topology.Names{Lab: name}
	unlock, err := lock(n)
	if err != nil {
		return err
	}
	defer unlock()
	return topology.Remove(n)
}
