package trace

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Rules modes: where the tracer takes each node's ruleset from.
const (
	// RulesAuto reads the kernel of every node whose network namespace is
	// known (Network.NetNS) and renders the others.
	RulesAuto = "auto"
	// RulesKernel reads every node's ruleset back from its kernel.
	RulesKernel = "kernel"
	// RulesRendered renders every node's ruleset from the cluster state.
	RulesRendered = "rendered"
)

// Options are one trace's settings beyond the request.
type Options struct {
	// Rules is RulesAuto (default), RulesKernel or RulesRendered.
	Rules string
	// ClusterCIDRs detect pod traffic in rendered rulesets (svcnet proxy
	// --cluster-cidr); empty means the nodes' pod CIDRs.
	ClusterCIDRs []netip.Prefix
	// EgressOff renders no egress masquerade (svcnet proxy
	// --egress-masquerade=false). Otherwise rendered rulesets masquerade
	// pod traffic leaving the cluster as svcnet proxy does by default, from
	// the pod networks ClusterCIDRs (or the nodes' pod CIDRs) name, with
	// Egress's other settings.
	EgressOff bool
	// Egress holds svcnet proxy's other egress masquerade settings
	// (--non-masquerade-cidrs, --masquerade-link-local, the Service CIDRs);
	// its PodCIDRs are ignored.
	Egress servicetable.EgressMasquerade
	// Verbose keeps rules that did not match.
	Verbose bool
	// Endpoint picks the endpoint to follow (see Start.Endpoint).
	Endpoint netip.AddrPort
	// DataPlane is the --data-plane of the nodes' svcnet proxy, whose rules
	// the tracer renders, reads back and compares ("": DefaultPlane).
	DataPlane string
}

// NewEngine returns an engine over the cluster state and network with the
// rules mode of opts.
func NewEngine(ctx context.Context, snap *model.Snapshot, net *Network, opts Options) (*Engine, error) {
	plane, err := PlaneNamed(opts.DataPlane)
	if err != nil {
		return nil, err
	}
	cidrs := opts.ClusterCIDRs
	if len(cidrs) == 0 {
		for _, nd := range net.Nodes {
			cidrs = append(cidrs, nd.PodCIDRs...)
		}
	}
	base := servicetable.NodeConfig{ClusterCIDRs: cidrs}
	if !opts.EgressOff {
		base.Egress = opts.Egress
		base.Egress.PodCIDRs = cidrs
	}
	tables := NewNodeTables(snap, net, base)
	rendered := RenderedRules(plane, tables)
	kernel := KernelRules(ctx, plane, func(node string) (string, error) {
		if ns, ok := net.NetNS[node]; ok {
			return ns, nil
		}
		return "", fmt.Errorf("node %s: its network namespace is unknown (the kernel's rules can be read in a lab, or on the node itself)", node)
	})
	e := &Engine{Net: net, Verbose: opts.Verbose, Plane: plane, Rendered: rendered}
	if plane.sockets {
		e.Sockets = RenderedSockets(tables)
		e.SocketMaps = KernelSocketMaps(func(node string) (string, error) { return nodeCgroup(net, node) })
		e.TC = withProxyFlags(net, RenderedTC(tables))
		e.TCMaps = KernelTCMaps(func(node string) (string, error) {
			if ns, ok := net.NetNS[node]; ok {
				return ns, nil
			}
			return "", fmt.Errorf("node %s: its network namespace is unknown", node)
		})
	}
	switch opts.Rules {
	case RulesRendered:
		e.Rules, e.RulesSource = rendered, renderedSource(plane)
	case RulesKernel:
		e.Rules, e.RulesSource = kernel, kernelSource(plane)
	case "", RulesAuto:
		var live, off []string
		for _, nd := range net.Nodes {
			if _, ok := net.NetNS[nd.Name]; ok {
				live = append(live, nd.Name)
			} else {
				off = append(off, nd.Name)
			}
		}
		e.Rules = func(node string) ([]*nft.Table, error) {
			if slices.Contains(live, node) {
				return kernel(node)
			}
			return rendered(node)
		}
		switch {
		case len(off) == 0:
			e.RulesSource = kernelSource(plane)
		case len(live) == 0:
			e.RulesSource = renderedSource(plane)
		default:
			e.RulesSource = fmt.Sprintf("kernel (%s), rendered (%s)", strings.Join(live, ", "), strings.Join(off, ", "))
		}
	default:
		return nil, fmt.Errorf("rules %q: want %s, %s or %s", opts.Rules, RulesAuto, RulesKernel, RulesRendered)
	}
	return e, nil
}

// kernelSource says where rules read back come from.
func kernelSource(p *Plane) string {
	s := "read back from each node's kernel"
	if p.name != DefaultPlane {
		s += " (--data-plane " + p.name + ")"
	}
	return s
}

// renderedSource says where rendered rules come from.
func renderedSource(p *Plane) string {
	s := "rendered from the cluster state as svcnet proxy renders them"
	if p.name != DefaultPlane {
		s += " (--data-plane " + p.name + ")"
	}
	return s
}

// Run resolves ask against the cluster state and traces it.
func Run(ctx context.Context, snap *model.Snapshot, net *Network, ask Ask, opts Options) (*Trace, error) {
	e, st, req, err := prepare(ctx, snap, net, ask, opts)
	if err != nil {
		return nil, err
	}
	return e.Trace(st, req)
}

// prepare makes the engine (reading each node's rules at most once) and
// resolves the request.
func prepare(ctx context.Context, snap *model.Snapshot, net *Network, ask Ask, opts Options) (*Engine, Start, Request, error) {
	e, err := NewEngine(ctx, snap, net, opts)
	if err != nil {
		return nil, Start{}, Request{}, err
	}
	e.Rules, e.Rendered = memoRules(e.Rules), memoRules(e.Rendered)
	st, req, err := Resolve(snap, net, ask)
	if err != nil {
		return nil, Start{}, Request{}, err
	}
	st.Endpoint = opts.Endpoint
	return e, st, req, nil
}

// memoRules reads each node's rules once.
func memoRules(f RulesFunc) RulesFunc {
	cache := map[string][]*nft.Table{}
	return func(node string) ([]*nft.Table, error) {
		if t, ok := cache[node]; ok {
			return t, nil
		}
		t, err := f(node)
		if err == nil {
			cache[node] = t
		}
		return t, err
	}
}
