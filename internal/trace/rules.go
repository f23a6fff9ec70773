package trace

import (
	"context"
	"fmt"

	"github.com/svcnet/svcnet/internal/cni/hostport"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// RenderedRules renders each node's ruleset from its service table
// (tables: built from the cluster state with the settings every node
// shares, pod traffic detection and egress masquerade, and the node's own,
// its name, zone, and NodePorts on its addresses) exactly as svcnet proxy
// programs it with data plane p. hostPort tables are the CNI plugin's
// runtime state and are not rendered.
func RenderedRules(p *Plane, tables *NodeTables) RulesFunc {
	return func(node string) ([]*nft.Table, error) {
		t, _, err := tables.Table(node)
		if err != nil {
			return nil, err
		}
		rendered, err := p.explain.Render(t)
		if err != nil {
			return nil, fmt.Errorf("node %s: %s rules: %w", node, p.name, err)
		}
		return rendered, nil
	}
}

// NodeTables builds each node's service table from the cluster state as
// svcnet proxy builds it (the settings of base and the node's own,
// nodeConfig), once per node, for every reader of the same trace session.
type NodeTables struct {
	snap  *model.Snapshot
	net   *Network
	base  servicetable.NodeConfig
	built map[string]*servicetable.Table
}

// NewNodeTables returns the tables of snap's nodes in net, none built yet.
func NewNodeTables(snap *model.Snapshot, net *Network, base servicetable.NodeConfig) *NodeTables {
	return &NodeTables{snap: snap, net: net, base: base, built: map[string]*servicetable.Table{}}
}

// Table returns node's service table and the configuration it was built
// with; an error for a node not in the cluster state.
func (n *NodeTables) Table(node string) (*servicetable.Table, servicetable.NodeConfig, error) {
	nd := n.net.Node(node)
	if nd == nil {
		return nil, servicetable.NodeConfig{}, fmt.Errorf("node %s: not in the cluster state", node)
	}
	cfg := nodeConfig(n.base, nd)
	t := n.built[node]
	if t == nil {
		t = servicetable.Build(n.snap, cfg)
		n.built[node] = t
	}
	return t, cfg, nil
}

// nodeConfig is base with node nd's own settings: its name, zone, and
// NodePorts on its addresses.
func nodeConfig(base servicetable.NodeConfig, nd *NodeNet) servicetable.NodeConfig {
	cfg := base
	cfg.NodeName, cfg.Zone, cfg.NodePortAddresses = nd.Name, nd.Zone, nd.Addrs
	return cfg
}

// KernelTable reports whether the tracer reads a table back from a live
// node running data plane p, and compares its trace events: the plane's
// tables and the CNI plugin's hostPort table.
func (p *Plane) KernelTable(name string) bool {
	return p.explain.Owns(name) || name == hostport.TableName
}

// KernelRules reads each node's ruleset back from the kernel, in the network
// namespace nsOf names for it ("" for the caller's own namespace), as data
// plane p programs it. Tables that do not exist are skipped; a node with
// none of them is an error.
func KernelRules(ctx context.Context, p *Plane, nsOf func(node string) (string, error)) RulesFunc {
	return func(node string) ([]*nft.Table, error) {
		name, err := nsOf(node)
		if err != nil {
			return nil, err
		}
		var ns *netns.NS
		if name != "" {
			if ns, err = netns.Open(name); err != nil {
				return nil, fmt.Errorf("node %s: %w", node, err)
			}
			defer ns.Close()
		}
		out, err := p.read(ctx, ns)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("node %s: no table of svcnet proxy's %s data plane in namespace %q: is svcnet proxy running there, with --data-plane %s?", node, p.name, name, p.name)
		}
		return out, nil
	}
}
