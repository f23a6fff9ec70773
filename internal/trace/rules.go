package trace

import (
	"context"
	"fmt"

	"github.com/svcnet/svcnet/internal/cni/hostport"
	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// plane is the data plane the tracer explains: what svcnet proxy programs by
// default, as nf_tables tables the simulator runs.
var plane dataplane.Explainer = nftables.Rules{}

// RenderedRules renders each node's ruleset from the cluster state exactly
// as svcnet proxy programs it, with the settings of base every node shares
// (pod traffic detection, egress masquerade) and the node's own (its name,
// zone, and NodePorts on its addresses). hostPort tables are the CNI
// plugin's runtime state and are not rendered.
func RenderedRules(snap *model.Snapshot, net *Network, base servicetable.NodeConfig) RulesFunc {
	return func(node string) ([]*nft.Table, error) {
		nd := net.Node(node)
		if nd == nil {
			return nil, fmt.Errorf("node %s: not in the cluster state", node)
		}
		cfg := base
		cfg.NodeName, cfg.Zone, cfg.NodePortAddresses = node, nd.Zone, nd.Addrs
		return plane.Render(servicetable.Build(snap, cfg))
	}
}

// KernelTable reports whether the tracer reads a table back from a live
// node: svcnet proxy's (the main table and its NAT shards) and the CNI
// plugin's hostPort table.
func KernelTable(name string) bool { return plane.Owns(name) || name == hostport.TableName }

// KernelRules reads each node's ruleset back from the kernel, in the network
// namespace nsOf names for it ("" for the caller's own namespace). Tables
// that do not exist are skipped; a node with none of them is an error.
func KernelRules(ctx context.Context, nsOf func(node string) (string, error)) RulesFunc {
	return func(node string) ([]*nft.Table, error) {
		name, err := nsOf(node)
		if err != nil {
			return nil, err
		}
		var conn *netlink.Conn
		if name == "" {
			conn, err = netlink.New()
		} else {
			ns, oerr := netns.Open(name)
			if oerr != nil {
				return nil, fmt.Errorf("node %s: %w", node, oerr)
			}
			defer ns.Close()
			conn, err = netlink.New(ns)
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		defer conn.Close()
		var out []*nft.Table
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			tables, err := nft.ReadTables(ctx, conn, f, KernelTable)
			if err != nil {
				return nil, fmt.Errorf("node %s: %w", node, err)
			}
			out = append(out, tables...)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("node %s: no svcnet table in namespace %q: is svcnet proxy running there?", node, name)
		}
		return out, nil
	}
}
