package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// Options configure Up.
type Options struct {
	Name  string
	Nodes int
	// ControlPlane is cluster.ControlPlaneFile (default) or
	// cluster.ControlPlaneKube.
	ControlPlane string
	// Binary is the svcnet binary the lab's processes run; default this one.
	Binary string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// ProxyArgs are extra flags for every node's svcnet proxy.
	ProxyArgs []string
	// K8sBin is the directory of kube-apiserver, kube-controller-manager and
	// kube-proxy; the kube control plane needs it.
	K8sBin string
	// Proxy is the nodes' Service proxy: cluster.ProxySvcnet (default), or
	// upstream kube-proxy, cluster.ProxyKubeProxyNFTables or
	// cluster.ProxyKubeProxyIPTables, which need the kube control plane. Beside kube-proxy every node still runs svcnet proxy
	// --data-plane none for the pod routes and the layer-2 speaker.
	Proxy string
	// DataPlane, when set, is every node's svcnet proxy's --data-plane (its
	// Service data plane, e.g. "nftables" or "none"); empty leaves the
	// proxy's default. It is for svcnet proxy as the nodes' Service proxy:
	// beside kube-proxy svcnet proxy runs with --data-plane none.
	DataPlane string
	// IPFamily is the lab's IP families: topology.StackIPv4 (default),
	// StackIPv6 or StackDual (IPv4 primary).
	IPFamily string
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
		o.ControlPlane = cluster.ControlPlaneFile
	}
	if o.ControlPlane != cluster.ControlPlaneFile && o.ControlPlane != cluster.ControlPlaneKube {
		return nil, fmt.Errorf("lab %s: --control-plane %q: want %s or %s", o.Name, o.ControlPlane, cluster.ControlPlaneFile, cluster.ControlPlaneKube)
	}
	if o.Proxy == "" {
		o.Proxy = cluster.ProxySvcnet
	}
	stack, err := topology.ParseStack(o.IPFamily)
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", o.Name, err)
	}
	if err := cluster.CheckProxy(o.Name, o.Proxy, o.ControlPlane); err != nil {
		return nil, err
	}
	if err := cluster.CheckDataPlane(o.Name, o.Proxy, o.DataPlane); err != nil {
		return nil, err
	}
	if o.ControlPlane == cluster.ControlPlaneKube && o.K8sBin == "" {
		return nil, fmt.Errorf("lab %s: the kube control plane needs the directory of kube-apiserver and kube-controller-manager (K8sBin; `make k8s` builds them; tools/k8s/build.sh prints the directory)", o.Name)
	}
	if err := cluster.CheckKubeProxyBinary(o.Name, o.Proxy, o.K8sBin); err != nil {
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
	unlock, err := cluster.Lock(n)
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
	info := &cluster.Info{Name: n.Lab, Nodes: o.Nodes, ControlPlane: o.ControlPlane, Binary: o.Binary, ProxyArgs: o.ProxyArgs,
		Proxy: o.Proxy, DataPlane: o.DataPlane, K8sBin: o.K8sBin, IPFamily: stack.String()}
	if cluster.ProxyPins(info) {
		progress("BPF filesystem for the proxies' pins: %s", n.BPFDir())
		if err := topology.MountBPFFS(n); err != nil {
			return nil, err
		}
	}
	if err := cluster.WriteInfo(n, info); err != nil {
		return nil, err
	}
	if err := cluster.WriteHeartbeatKey(n); err != nil {
		return nil, err
	}
	l := &Lab{c: &cluster.Cluster{Names: n, Info: info}, unlock: unlock}

	progress("fabric: namespace %s, bridge %s for the node network %s", n.Fabric(), topology.FabricBridge, list(stack.NodeNetworks()))
	fabric, err := topology.MakeFabric(n.Fabric(), stack.Gateways())
	if err != nil {
		return nil, err
	}
	defer fabric.Close()
	progress("client: namespace %s, %s", n.Client(), list(stack.ClientAddrs()))
	client, err := topology.Attach(fabric, n.Client(), "client", stack.ClientAddrs(), false)
	if err != nil {
		return nil, err
	}
	client.Close()
	for i := 1; i <= o.Nodes; i++ {
		cg, err := n.NodeCgroupDir(i)
		if err != nil {
			return nil, err
		}
		progress("node %s: namespace %s, %s, pods %s, cgroup %s", topology.NodeName(i), n.Node(i), list(stack.NodeAddrs(i)), list(stack.PodCIDRs(i)), cg)
		ns, err := topology.Attach(fabric, n.Node(i), topology.NodeName(i), stack.NodeAddrs(i), true)
		if err != nil {
			return nil, err
		}
		ns.Close()
		if err := topology.WriteNodeEtc(n, stack, i); err != nil {
			return nil, err
		}
		if _, err := topology.MakeNodeCgroup(n, i); err != nil {
			return nil, err
		}
	}
	if err := topology.InstallCNI(n, stack, o.Binary, o.Nodes); err != nil {
		return nil, err
	}
	if o.ControlPlane == cluster.ControlPlaneKube {
		progress("control plane: etcd, kube-apiserver and kube-controller-manager in %s at %s", n.Control(), stack.ControlAddr())
		kc, err := cluster.StartKube(ctx, n, stack, fabric, o.K8sBin)
		if err != nil {
			return nil, err
		}
		l.c.CP = kc
		// Pods reach the API server directly (svcnet dns watches it), as in a
		// cluster whose control plane is routed to the pod network.
		if err := topology.RoutePodCIDRs(n.Control(), stack, o.Nodes); err != nil {
			return nil, err
		}
		progress("control plane: svcnet lb controller in %s", n.Control())
		if err := l.c.InstallLB(ctx, kc); err != nil {
			return nil, fmt.Errorf("lab %s: svcnet lb: %w", n.Lab, err)
		}
	} else {
		fc := cluster.NewFile(n, stack)
		progress("control plane: svcnet's embedded control plane, publishing %s", fc.PublishPath())
		l.c.CP = fc
		if err := l.c.StartControlPlane(ctx, fabric); err != nil {
			return nil, fmt.Errorf("lab %s: %w", n.Lab, err)
		}
	}
	nodes := make([]*corev1.Node, o.Nodes)
	for i := range nodes {
		nodes[i] = cluster.Node(stack, i+1)
	}
	if err := l.c.CP.RegisterNodes(ctx, nodes); err != nil {
		return nil, fmt.Errorf("lab %s: register nodes: %w", n.Lab, err)
	}
	progress("load balancer: pool %s (%s), layer-2 speakers in every node's proxy", PoolName, strings.Join(poolRanges(stack), ", "))
	if err := l.applyDefaultPool(ctx); err != nil {
		return nil, err
	}
	progress("cluster DNS: Service %s/%s at %s, svcnet dns in pod %s/%s on %s", DNSNamespace, DNSService, list(stack.ClusterDNS()), DNSNamespace, DNSPod, topology.NodeName(1))
	if err := l.startClusterDNS(ctx); err != nil {
		return nil, err
	}
	if err := l.c.StartNodes(ctx, progress); err != nil {
		return nil, err
	}
	if err := l.waitClusterDNS(ctx); err != nil {
		return nil, err
	}
	if err := l.c.WaitSpeakers(ctx); err != nil {
		return nil, fmt.Errorf("lab %s: %w", n.Lab, err)
	}
	progress("lab %q is up: %d nodes, client %s", n.Lab, o.Nodes, list(stack.ClientAddrs()))
	return l, nil
}

// list renders addresses or prefixes for a progress line: "a" or "a and b".
func list[T fmt.Stringer](xs []T) string {
	return strings.ReplaceAll(topology.Join(xs), ",", " and ")
}
