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

// RenderedRules renders each node's ruleset from the cluster state exactly
// as svcnet proxy programs it with data plane p, with the settings of base
// every node shares (pod traffic detection, egress masquerade) and the
// node's own (its name, zone, and NodePorts on its addresses). hostPort
// tables are the CNI plugin's runtime state and are not rendered.
func RenderedRules(p *Plane, snap *model.Snapshot, net *Network, base servicetable.NodeConfig) RulesFunc {
	return func(node string) ([]*nft.Table, error) {
		nd := net.Node(node)
		if nd == nil {
			return nil, fmt.Errorf("node %s: not in the cluster state", node)
		}
		tables, err := p.explain.Render(servicetable.Build(snap, nodeConfig(base, nd)))
		if err != nil {
			return nil, fmt.Errorf("node %s: %s rules: %w", node, p.name, err)
		}
		return tables, nil
	}
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
