package trace

import (
	"fmt"

	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/dataplane/userspace"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// userspaceRules is the userspace plane as the tracer explains it: the
// redirect table read back from a node (its rules name the proxy ports the
// running proxy chose), which the simulator follows to the proxy port on
// the node: the first leg. The second leg, the proxy's own connection from
// the node to an endpoint, is chosen in user space (round robin or least
// connections, another endpoint on a failed connect) and is not in any
// table: trace it as its own connection, from the node to the endpoint
// (svcnet lab trace NODE ENDPOINT_IP:PORT), as the demo does.
type userspaceRules struct{}

// Render refuses: the proxy ports are the running proxy's, not the cluster
// state's, so the plane's rules cannot be rendered from the state alone.
func (userspaceRules) Render(*servicetable.Table) ([]*nft.Table, error) {
	return nil, fmt.Errorf("the userspace plane's proxy ports are chosen by each node's running proxy: trace its rules as read from the kernel (--rules kernel, as svcnet lab trace does)")
}

// Owns reports whether a table is the userspace plane's redirect table.
func (userspaceRules) Owns(table string) bool { return userspace.Rules{}.Owns(table) }

func init() {
	us := &Plane{name: userspace.Name, explain: userspaceRules{}, proxied: true,
		service: userspaceService,
		egress: func(table, chain string) bool {
			return table == userspace.TableName && nftables.IsEgressChain(nftables.TableName, chain)
		}}
	us.read = us.readNFTables
	planes[us.name] = us
}

// userspaceService names the Service port of a per-Service chain of the
// userspace plane: its loadBalancerSourceRanges chains ("firewall"), so
// that a drop there reads as a source-range filter, as on the other
// planes. The redirect chains are shared by every Service and name none.
func userspaceService(chain, _ string) (kind, service string, ok bool) {
	if id, ok := userspace.FirewallOf(chain); ok {
		return "firewall", id, true
	}
	return "", "", false
}
