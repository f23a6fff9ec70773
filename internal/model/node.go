package model

import (
	"net/netip"
	"slices"
)

// Node is the slim form of a v1 Node.
type Node struct {
	Name      string
	Addresses []NodeAddress
	PodCIDRs  []netip.Prefix
	Labels    map[string]string
	// TaintKeys are the keys of spec.taints, in spec order (effects and
	// values are not kept: what reads taints asks only whether a key is
	// there, as kube-proxy does of ToBeDeletedByClusterAutoscaler).
	TaintKeys []string
	Ready     bool
	// Terminating is a set deletion timestamp: the Node is being deleted
	// and waits for its finalizers.
	Terminating bool
}

// NodeAddress is one entry of status.addresses.
type NodeAddress struct {
	Type    string // InternalIP, ExternalIP, Hostname, ...
	Address string // an IP for *IP types, a name otherwise
}

// HasTaint reports whether the node carries a taint with key.
func (n *Node) HasTaint(key string) bool { return slices.Contains(n.TaintKeys, key) }

// Zone returns the node's topology.kubernetes.io/zone label, or "".
func (n *Node) Zone() string { return n.Labels[LabelTopologyZone] }

// IPs returns the node's InternalIP then ExternalIP addresses that parse as IPs,
// in status order within each type.
func (n *Node) IPs() []netip.Addr {
	var out []netip.Addr
	for _, t := range []string{"InternalIP", "ExternalIP"} {
		for _, a := range n.Addresses {
			if a.Type != t {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip)
			}
		}
	}
	return out
}
