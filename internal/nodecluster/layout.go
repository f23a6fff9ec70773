package nodecluster

import (
	"net/netip"
	"path/filepath"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// layout names everything one cluster makes: namespaces (the lab's names),
// cgroups and files.
type layout struct {
	name string // the cluster's name
	dir  string // its state directory (absolute)
}

func (l layout) names() topology.Names { return topology.Names{Lab: l.name} }

// cpDir is the control plane's directory (kubecluster's Dir).
func (l layout) cpDir() string { return filepath.Join(l.dir, "control-plane") }

// nodeDir is node's directory.
func (l layout) nodeDir(node string) string { return filepath.Join(l.dir, "nodes", node) }

// cgroupTop is the cluster's cgroup, relative to a hierarchy's root.
func (l layout) cgroupTop() string { return "svcnet." + l.name }

// cgroupCP holds the control plane's processes.
func (l layout) cgroupCP() string { return l.cgroupTop() + "/control-plane" }

// cgroupNode is node's kubelet cgroupRoot (relative; the kubelet's is "/" + it).
func (l layout) cgroupNode(node string) string { return l.cgroupTop() + "/" + node }

// cgroupDaemons holds node's own processes: its namespace holder, containerd
// (and the shims it starts), the kubelet.
func (l layout) cgroupDaemons(node string) string { return l.cgroupNode(node) + "/system" }

// Node is one node of a cluster.
type Node struct {
	// Name is the Node's name, also its hostname: node1, node2, ...
	Name string
	// Index is i of nodei.
	Index int
	// Addr is its address on the node network (the lab's plan), the kubelet's
	// node IP (InternalIP).
	Addr netip.Addr
	// PodCIDR is its pod CIDR (the lab's plan: 192.168.i.0/24), set on the Node
	// before its kubelet registers it.
	PodCIDR netip.Prefix
	// Zone is its topology.kubernetes.io/zone label.
	Zone string
	// NetNS is the name of its network namespace (NAME.nodei).
	NetNS string
}

func nodesOf(o Options) []Node {
	nodes := make([]Node, o.Nodes)
	for i := range nodes {
		n := i + 1
		nodes[i] = Node{
			Name:    topology.NodeName(n),
			Index:   n,
			Addr:    topology.NodeAddr(n),
			PodCIDR: topology.PodCIDR(n),
			Zone:    o.Zone(n),
			NetNS:   topology.Names{Lab: o.Name}.Node(n),
		}
	}
	return nodes
}
