package trace

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/svcnet/svcnet/internal/ipfamily"

	"github.com/svcnet/svcnet/internal/model"
)

// Network is the cluster network a packet crosses between netfilter passes:
// nodes on one node network, each routing its pod CIDR to a bridge and the
// other nodes' pod CIDRs to those nodes (svcnet proxy --pod-routes, host-gw),
// pods behind the bridge, and external hosts on the node network.
//
// It models the layout svcnet's CNI plugin and lab build: a node's uplink is
// NodeIface, its pods hang off Bridge (gateway: the first address of the pod
// CIDR), each pod has a host route /32 (/128) and an on-link default route via
// that gateway, so all pod traffic goes through the node.
type Network struct {
	Nodes []NodeNet
	Pods  []PodNet
	// Externals are known hosts outside the cluster, by name ("client"):
	// their addresses, at most one per family.
	Externals map[string][]netip.Addr
	// Gateways are the node network's router's addresses, at most one per
	// family (the default routes of nodes).
	Gateways []netip.Addr
	// NodeNetworks are the node network's prefixes (on-link from the nodes);
	// empty means "the /24 (/64) of each node address".
	NodeNetworks []netip.Prefix
	// NetNS names places' network namespaces when known (the lab): by node
	// name, by "ns/name" of a pod, by external name.
	NetNS map[string]string
	// Cgroups names, by node, the cgroup v2 path (as /proc/PID/cgroup
	// names it: /kubepods) its svcnet proxy --data-plane ebpf attached the
	// socket load balancer to (its --cgroup), when known; Verify otherwise
	// reads it from the proxy running in the node's NetNS.
	Cgroups map[string]string
}

// NodeNet is one node's part of the network.
type NodeNet struct {
	Name     string
	Addrs    []netip.Addr // InternalIPs (then ExternalIPs), one per family
	PodCIDRs []netip.Prefix
	Ready    bool
	Zone     string
}

// PodNet is one pod's part of the network.
type PodNet struct {
	Key         string // ns/name
	Node        string
	IPs         []netip.Addr
	HostNetwork bool
	Ready       bool
	Terminating bool
}

// Interface names of the layout.
const (
	NodeIface = "eth0" // a node's uplink to the node network
	Bridge    = "cni0" // a node's pod bridge
	PodIface  = "eth0" // a pod's interface
)

// NetworkFrom builds the network of a model snapshot: nodes with their
// addresses and pod CIDRs, pods with their IPs. externals and netns may be nil.
func NetworkFrom(snap *model.Snapshot, externals map[string][]netip.Addr, gateways []netip.Addr, netns map[string]string) *Network {
	n := &Network{Externals: externals, Gateways: gateways, NetNS: netns}
	for _, nd := range snap.Nodes() {
		n.Nodes = append(n.Nodes, NodeNet{Name: nd.Name, Addrs: nd.IPs(), PodCIDRs: nd.PodCIDRs, Ready: nd.Ready, Zone: nd.Zone()})
	}
	for _, p := range snap.Pods() {
		if len(p.IPs) == 0 {
			continue
		}
		n.Pods = append(n.Pods, PodNet{Key: p.Namespace + "/" + p.Name, Node: p.NodeName, IPs: p.IPs,
			HostNetwork: p.HostNetwork, Ready: p.Ready, Terminating: p.Terminating})
	}
	return n
}

// Node returns the node called name, or nil.
func (n *Network) Node(name string) *NodeNet {
	for i := range n.Nodes {
		if n.Nodes[i].Name == name {
			return &n.Nodes[i]
		}
	}
	return nil
}

// Addr returns the node's address of a's family (invalid when it has none).
func (nd *NodeNet) Addr(v6 bool) netip.Addr {
	for _, a := range nd.Addrs {
		if a.Is6() == v6 {
			return a
		}
	}
	return netip.Addr{}
}

// podCIDR returns the node's pod CIDR of a family.
func (nd *NodeNet) podCIDR(v6 bool) (netip.Prefix, bool) {
	for _, p := range nd.PodCIDRs {
		if p.Addr().Is6() == v6 {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// gatewayOf returns the node's bridge gateway of a family: the first address
// of its pod CIDR.
func (nd *NodeNet) gatewayOf(v6 bool) netip.Addr {
	if p, ok := nd.podCIDR(v6); ok {
		return p.Masked().Addr().Next()
	}
	return netip.Addr{}
}

// IfaceAddr returns the primary address of family f of the node's interface
// name (what a redirect sends a packet arriving on it to): the node address
// on its uplink, the gateway on its pod bridge; invalid for any other.
func (nd *NodeNet) IfaceAddr(name string, f ipfamily.Family) netip.Addr {
	v6 := f == ipfamily.IPv6
	switch name {
	case NodeIface:
		return nd.Addr(v6)
	case Bridge:
		return nd.gatewayOf(v6)
	}
	return netip.Addr{}
}

// LocalAddrs are the node's addresses: its node addresses and bridge gateways.
func (nd *NodeNet) LocalAddrs() []netip.Addr {
	out := slices.Clone(nd.Addrs)
	for _, v6 := range []bool{false, true} {
		if g := nd.gatewayOf(v6); g.IsValid() {
			out = append(out, g)
		}
	}
	return out
}

// Egress returns the source address a packet from the node to dst leaves
// with (what masquerade uses): the bridge gateway for its own pods, else the
// node address of dst's family.
func (nd *NodeNet) Egress(dst netip.Addr) netip.Addr {
	v6 := dst.Is6()
	if p, ok := nd.podCIDR(v6); ok && p.Contains(dst) {
		return nd.gatewayOf(v6)
	}
	return nd.Addr(v6)
}

// PodByIP returns the pod (not host-network) with address a, or nil.
func (n *Network) PodByIP(a netip.Addr) *PodNet {
	for i := range n.Pods {
		if !n.Pods[i].HostNetwork && slices.Contains(n.Pods[i].IPs, a) {
			return &n.Pods[i]
		}
	}
	return nil
}

// Pod returns the pod with key ns/name, or nil.
func (n *Network) Pod(key string) *PodNet {
	for i := range n.Pods {
		if n.Pods[i].Key == key {
			return &n.Pods[i]
		}
	}
	return nil
}

// NodeByAddr returns the node owning a as a node address, or nil.
func (n *Network) NodeByAddr(a netip.Addr) *NodeNet {
	for i := range n.Nodes {
		if slices.Contains(n.Nodes[i].Addrs, a) {
			return &n.Nodes[i]
		}
	}
	return nil
}

// nodeOwningPodIP returns the node whose pod CIDR holds a, or nil.
func (n *Network) nodeOwningPodIP(a netip.Addr) *NodeNet {
	for i := range n.Nodes {
		if p, ok := n.Nodes[i].podCIDR(a.Is6()); ok && p.Contains(a) {
			return &n.Nodes[i]
		}
	}
	return nil
}

// external returns the name of the external host with address a ("" if none).
func (n *Network) external(a netip.Addr) string {
	names := make([]string, 0, len(n.Externals))
	for k := range n.Externals {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if slices.Contains(n.Externals[k], a) {
			return k
		}
	}
	return ""
}

// externalAddr returns the named external host's address of the family
// (v6), else its first; ok is false when there is no such host.
func (n *Network) externalAddr(name string, v6 bool) (netip.Addr, bool) {
	addrs, ok := n.Externals[name]
	if !ok || len(addrs) == 0 {
		return netip.Addr{}, false
	}
	return familyOr(addrs, v6), true
}

// familyOr returns the first of addrs of the family (v6), else the first.
func familyOr(addrs []netip.Addr, v6 bool) netip.Addr {
	for _, a := range addrs {
		if a.Is6() == v6 {
			return a
		}
	}
	return addrs[0]
}

// onNodeNetwork reports whether a is on-link on the node network, and the
// prefix it is in.
func (n *Network) onNodeNetwork(a netip.Addr) (netip.Prefix, bool) {
	nets := n.NodeNetworks
	if len(nets) == 0 {
		for _, nd := range n.Nodes {
			for _, na := range nd.Addrs {
				bits := 24
				if na.Is6() {
					bits = 64
				}
				p, _ := na.Prefix(bits)
				nets = append(nets, p)
			}
		}
	}
	for _, p := range nets {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// NodePlace returns the place of node nd, addressed in a family.
func (n *Network) NodePlace(nd *NodeNet, v6 bool) Place {
	return Place{Kind: PlaceNode, Name: nd.Name, Node: nd.Name, Addr: nd.Addr(v6), NetNS: n.NetNS[nd.Name]}
}

// PodPlace returns the place of pod p, addressed in a family.
func (n *Network) PodPlace(p *PodNet, v6 bool) Place {
	pl := Place{Kind: PlacePod, Name: p.Key, Node: p.Node, NetNS: n.NetNS[p.Key]}
	for _, a := range p.IPs {
		if a.Is6() == v6 {
			pl.Addr = a
			break
		}
	}
	return pl
}

// ExternalPlace returns the place of an external host with address a.
func (n *Network) ExternalPlace(a netip.Addr) Place {
	name := n.external(a)
	if name == "" {
		name = a.String()
	}
	return Place{Kind: PlaceExternal, Name: name, Addr: a, NetNS: n.NetNS[name]}
}

// RouteFromNode is the routing decision on node nd for a packet to dst that
// is not local: its own pods over the bridge, other nodes' pods via those
// nodes (the pod routes), the node network on-link, anything else via the
// gateway. An error says why dst is unreachable.
func (n *Network) RouteFromNode(nd *NodeNet, dst netip.Addr) (Route, error) {
	v6 := dst.Is6()
	if p, ok := nd.podCIDR(v6); ok && p.Contains(dst) {
		r := Route{Dev: Bridge, Text: fmt.Sprintf("%s dev %s proto kernel scope link src %s", p.Masked(), Bridge, nd.gatewayOf(v6))}
		pod := n.PodByIP(dst)
		if pod == nil || pod.Node != nd.Name {
			return r, fmt.Errorf("route %s: no pod of node %s has address %s", r.Text, nd.Name, dst)
		}
		r.Next = n.PodPlace(pod, v6)
		r.Link = fmt.Sprintf("bridge %s → the pod's veth → %s %s", Bridge, pod.Key, PodIface)
		return r, nil
	}
	if other := n.nodeOwningPodIP(dst); other != nil {
		p, _ := other.podCIDR(v6)
		via := other.Addr(v6)
		r := Route{Dev: NodeIface, Via: via, Text: fmt.Sprintf("%s via %s dev %s proto 154", p.Masked(), via, NodeIface)}
		if !via.IsValid() {
			return r, fmt.Errorf("no route to %s: node %s has no %s address", dst, other.Name, familyWord(v6))
		}
		r.Next = n.NodePlace(other, v6)
		r.Link = fmt.Sprintf("%s → node network → %s %s", NodeIface, other.Name, NodeIface)
		return r, nil
	}
	if pfx, ok := n.onNodeNetwork(dst); ok {
		r := Route{Dev: NodeIface, Text: fmt.Sprintf("%s dev %s proto kernel scope link src %s", pfx, NodeIface, nd.Addr(v6))}
		if other := n.NodeByAddr(dst); other != nil {
			r.Next = n.NodePlace(other, v6)
			r.Link = fmt.Sprintf("%s → node network → %s %s", NodeIface, other.Name, NodeIface)
		} else {
			r.Next = n.ExternalPlace(dst)
			r.Link = NodeIface + " → node network"
		}
		return r, nil
	}
	var gw netip.Addr
	if len(n.Gateways) > 0 {
		gw = familyOr(n.Gateways, v6)
	}
	r := Route{Dev: NodeIface, Via: gw, Text: fmt.Sprintf("default via %s dev %s", gw, NodeIface), Next: n.ExternalPlace(dst), LeavesCluster: true}
	if !gw.IsValid() || gw.Is6() != v6 {
		return r, fmt.Errorf("no route to %s from node %s: not a pod, node or node-network address, and no %s gateway", dst, nd.Name, familyWord(v6))
	}
	r.Link = fmt.Sprintf("%s → gateway %s (leaves the cluster)", NodeIface, gw)
	return r, nil
}

// RouteFromPod is a pod's routing decision: everything but its own address
// goes to its node, through the on-link default route via the bridge gateway.
func (n *Network) RouteFromPod(p *PodNet, dst netip.Addr) (Route, error) {
	nd := n.Node(p.Node)
	if nd == nil {
		return Route{}, fmt.Errorf("pod %s: its node %q is unknown", p.Key, p.Node)
	}
	gw := nd.gatewayOf(dst.Is6())
	return Route{
		Dev: PodIface, Via: gw, Text: fmt.Sprintf("default via %s dev %s onlink", gw, PodIface),
		Next: n.NodePlace(nd, dst.Is6()),
		Link: fmt.Sprintf("%s → veth → bridge %s of %s", PodIface, Bridge, nd.Name),
	}, nil
}

// RouteFromExternal is an external host's routing decision: node addresses
// and the node network on-link; any other address (a LoadBalancer IP, an
// externalIP, a ClusterIP) reaches the node entry, the node that answers for it
// (ARP owner, or the router's next hop), which the caller names.
func (n *Network) RouteFromExternal(dst netip.Addr, entry *NodeNet) (Route, error) {
	v6 := dst.Is6()
	if nd := n.NodeByAddr(dst); nd != nil {
		pfx, _ := n.onNodeNetwork(dst)
		return Route{Dev: NodeIface, Text: fmt.Sprintf("%s dev %s", pfx, NodeIface), Next: n.NodePlace(nd, v6),
			Link: fmt.Sprintf("node network → %s %s", nd.Name, NodeIface)}, nil
	}
	if pfx, ok := n.onNodeNetwork(dst); ok && (entry == nil || n.external(dst) != "") {
		return Route{Dev: NodeIface, Text: fmt.Sprintf("%s dev %s", pfx, NodeIface), Next: n.ExternalPlace(dst),
			Link: "node network"}, nil
	}
	if entry == nil {
		if n.nodeOwningPodIP(dst) != nil {
			return Route{}, fmt.Errorf("%s is a pod address: the node network has no route to the pod CIDRs (give --node when a router sends them to a node)", dst)
		}
		return Route{}, fmt.Errorf("no node is known to receive %s from outside the cluster: give --node", dst)
	}
	r := Route{Dev: NodeIface, Text: fmt.Sprintf("%s reaches node %s (it answers for the address on the node network)", dst, entry.Name),
		Next: n.NodePlace(entry, v6), Link: fmt.Sprintf("node network → %s %s", entry.Name, NodeIface)}
	if pfx, ok := n.onNodeNetwork(dst); ok {
		r.Text = fmt.Sprintf("%s dev %s (%s answers ARP/NDP for %s)", pfx, NodeIface, entry.Name, dst)
	}
	return r, nil
}

func familyWord(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}
