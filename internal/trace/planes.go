package trace

import (
	"context"
	"fmt"
	"strings"

	"github.com/svcnet/svcnet/internal/cni/hostport"
	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/dataplane/iptables"
	"github.com/svcnet/svcnet/internal/dataplane/nftables"
	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
)

// Plane is a data plane of svcnet proxy as the tracer explains it: how its
// rules are rendered as nf_tables tables, which tables of a kernel are its,
// and how they are read back from a node.
type Plane struct {
	name    string
	explain dataplane.Explainer
	// read reads the node's tables the tracer runs (the plane's and the CNI
	// plugin's hostPort table) in ns (nil: the caller's namespace).
	read func(ctx context.Context, ns *netns.NS) ([]*nft.Table, error)
	// service names the Service port a rule of chain (text: as the
	// simulator shows it) is about and the kind of its chain ("service",
	// "local", "external", "firewall", "endpoint").
	service func(chain, text string) (kind, service string, ok bool)
	// egress reports whether a chain is the egress masquerade's.
	egress func(table, chain string) bool
	// untraceable, when set, says why nftrace cannot see the plane's rules
	// on the node of namespace ns ("" when it can).
	untraceable func(ctx context.Context, ns *netns.NS) string
	// proxied: the plane's rules send a Service's traffic to a proxy on
	// the node, which chooses the endpoint in user space, so no rule makes
	// an endpoint choice (the rewrite to the proxy port is not one).
	proxied bool
	// sockets: the plane's socket load balancer translates connects on
	// every node before any rule sees a packet (Engine.Sockets says what it
	// does; Verify reads its maps).
	sockets bool
}

// Name is the plane's --data-plane value.
func (p *Plane) Name() string { return p.name }

// planes are the data planes the tracer explains, by --data-plane value.
var planes = map[string]*Plane{}

func init() {
	nft := &Plane{name: nftables.Name, explain: nftables.Rules{}, egress: nftables.IsEgressChain,
		service: func(chain, _ string) (string, string, bool) { return serviceOfChain(chain) }}
	nft.read = nft.readNFTables
	ipt := &Plane{name: iptables.Name, explain: iptables.Rules{}, service: iptables.ServiceOf,
		egress: func(table, chain string) bool { return table == iptables.TableNAT && chain == iptables.ChainEgressMasq }, untraceable: legacyIPTables}
	ipt.read = ipt.readIPTables
	for _, p := range []*Plane{nft, ipt} {
		planes[p.name] = p
	}
}

// DefaultPlane is the data plane svcnet proxy runs when none is named.
const DefaultPlane = nftables.Name

// PlaneNamed returns the data plane called name ("" for DefaultPlane).
func PlaneNamed(name string) (*Plane, error) {
	if name == "" {
		name = DefaultPlane
	}
	if p := planes[name]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("data plane %q: the tracer explains %s", name, strings.Join(PlaneNames(), ", "))
}

// PlaneNames returns the names of the data planes the tracer explains,
// sorted.
func PlaneNames() []string { return sortedKeys(planes) }

// readNFTables reads the node's tables that KernelTable names over netlink.
func (p *Plane) readNFTables(ctx context.Context, ns *netns.NS) ([]*nft.Table, error) {
	return readNFT(ctx, ns, p.KernelTable)
}

// conn opens a netlink connection in ns (nil: the caller's namespace).
func conn(ns *netns.NS) (*netlink.Conn, error) {
	if ns == nil {
		return netlink.New()
	}
	return netlink.New(ns)
}

func readNFT(ctx context.Context, ns *netns.NS, keep func(string) bool) ([]*nft.Table, error) {
	conn, err := conn(ns)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var out []*nft.Table
	for _, f := range ipfamily.All {
		tables, err := nft.ReadTables(ctx, conn, f, keep)
		if err != nil {
			return nil, err
		}
		out = append(out, tables...)
	}
	return out, nil
}

// readAttempts bounds the reads of an iptables-nft node whose tables change
// between iptables-save and the netlink read of their handles.
const readAttempts = 3

// readIPTables reads the iptables plane's nat and filter tables with
// iptables-save of the variant the node uses (internal/iptables.Detect), in
// the node's namespace, and translates them (iptables.ReadKernel); the CNI
// plugin's hostPort table is read over netlink. With iptables-nft the
// translated tables take the kernel's table and rule handles
// (iptables.AdoptHandles), read over netlink right after: the simulator
// orders base chains of equal priority by table handle, and --verify maps
// trace events to rules by handle.
func (p *Plane) readIPTables(ctx context.Context, ns *netns.NS) ([]*nft.Table, error) {
	var command ipt.CommandFunc
	if ns != nil {
		command = ns.CommandContext
	}
	run := &ipt.Exec{Variant: ipt.Detect(ctx, command), Command: command}
	var tables []*nft.Table
	var err error
	for range readAttempts {
		tables, err = iptables.ReadKernel(ctx, run)
		if err != nil {
			return nil, fmt.Errorf("cannot explain the iptables rules (iptables-%s): %w", run.Variant, err)
		}
		if run.Variant != ipt.NFT {
			break
		}
		if err = adoptHandles(ctx, ns, tables); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	hp, err := readNFT(ctx, ns, func(name string) bool { return name == hostport.TableName })
	if err != nil {
		return nil, err
	}
	if !hasRules(tables) {
		return hp, nil
	}
	return append(tables, hp...), nil
}

// adoptHandles reads iptables-nft's tables of the translated ones over
// netlink and gives them the kernel's handles.
func adoptHandles(ctx context.Context, ns *netns.NS, tables []*nft.Table) error {
	conn, err := conn(ns)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, t := range tables {
		k, err := conn.Read(ctx, t.Family, t.Name)
		if err != nil {
			return fmt.Errorf("iptables-nft table %s %s: %w", nft.Keyword(t.Family), t.Name, err)
		}
		if err := iptables.AdoptHandles(t, k); err != nil {
			return err
		}
	}
	return nil
}

// legacyIPTables says why nftrace cannot see the iptables plane's rules on
// a node whose iptables is iptables-legacy: they are x_tables rules, which
// nf_tables' trace does not report.
func legacyIPTables(ctx context.Context, ns *netns.NS) string {
	var command ipt.CommandFunc
	if ns != nil {
		command = ns.CommandContext
	}
	if ipt.Detect(ctx, command) == ipt.Legacy {
		return "iptables-legacy: its rules are x_tables rules, which nftrace does not see"
	}
	return ""
}

// hasRules reports whether any of tables has a rule.
func hasRules(tables []*nft.Table) bool {
	for _, t := range tables {
		for _, c := range t.Chains {
			if len(c.Rules) > 0 {
				return true
			}
		}
	}
	return false
}
