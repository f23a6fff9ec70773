package trace

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
)

// Verification where nftrace cannot see a plane's rules (iptables-legacy):
// the kernel's trace events of those tables are not compared; instead the
// rules read back must equal the rendered ones (renderedDiffers), and the
// connection the probe made must have been DNATed, by the node that chose
// the endpoint, to one of the traced candidates (conntrackChoice).

// conntrackChoice finds the probe's connection in the conntrack table of
// the node where first chose the endpoint (namespace name) and returns the
// index of the candidate trace that goes to the endpoint the kernel chose,
// or a difference when it is none of them.
func conntrackChoice(first *Trace, cands []*Trace, name string) (int, string, error) {
	node := first.Choice.Node
	var arrive *Tuple
	for i, h := range first.Hops {
		if h.Place.Kind == PlaceNode && h.Place.Name == node {
			arrive = &first.Hops[i].Arrive
			break
		}
	}
	if arrive == nil {
		return -1, "", fmt.Errorf("verify: node %s: the trace does not cross it: %w", node, ErrTrace)
	}
	ns, err := netns.Open(name)
	if err != nil {
		return -1, "", fmt.Errorf("verify: node %s: %w", node, err)
	}
	defer ns.Close()
	ct, err := conntrack.NewNetlinkIn(ns)
	if err != nil {
		return -1, "", fmt.Errorf("verify: node %s: conntrack: %w", node, err)
	}
	defer ct.Close()
	flows, err := ct.List(ipfamily.Of(arrive.Dst.Addr()))
	if err != nil {
		return -1, "", fmt.Errorf("verify: node %s: %w", node, err)
	}
	ep, ok := dnatOfFlow(flows, *arrive)
	if !ok {
		return -1, fmt.Sprintf("node %s: conntrack has no DNATed connection %s: the kernel did not translate the packet as traced", node, *arrive), nil
	}
	i := slices.IndexFunc(cands, func(tr *Trace) bool { return chosenOf(tr) == ep.String() })
	if i < 0 {
		return -1, fmt.Sprintf("node %s: conntrack shows the connection DNATed to %s, which is none of the traced candidates", node, ep), nil
	}
	return i, "", nil
}

// dnatOfFlow returns where the flow of packet t (as it arrived: protocol,
// source address, destination) was DNATed to: its reply's source, when that
// differs from the original destination.
func dnatOfFlow(flows []conntrack.Flow, t Tuple) (netip.AddrPort, bool) {
	proto, _ := nft.ProtoNumber(t.Proto)
	for _, f := range flows {
		if f.Proto == proto && f.OrigSrc.Addr() == t.Src.Addr() && f.OrigDst == t.Dst && f.ReplySrc != t.Dst {
			return f.ReplySrc, true
		}
	}
	return netip.AddrPort{}, false
}

// renderedDiffers compares the plane's tables read back from node with
// those rendered from the cluster state, rule by rule (their text), and
// returns each difference.
func renderedDiffers(e *Engine, node string) ([]string, error) {
	if e.Rendered == nil {
		return nil, fmt.Errorf("verify: node %s: no rendered rules to compare with: %w", node, ErrTrace)
	}
	kernel, err := e.Rules(node)
	if err != nil {
		return nil, err
	}
	rendered, err := e.Rendered(node)
	if err != nil {
		return nil, err
	}
	return tablesDiffer(node, kernel, rendered, e.plane().explain.Owns), nil
}

// tablesDiffer lists how the tables owns names differ between kernel and
// rendered: tables or chains only on one side, and rules that differ.
func tablesDiffer(node string, kernel, rendered []*nft.Table, owns func(string) bool) []string {
	index := func(ts []*nft.Table) map[string]*nft.Table {
		out := map[string]*nft.Table{}
		for _, t := range ts {
			if owns(t.Name) {
				out[nft.Keyword(t.Family)+" "+t.Name] = t
			}
		}
		return out
	}
	k, r := index(kernel), index(rendered)
	var out []string
	for _, name := range sortedKeys(r) {
		kt := k[name]
		if kt == nil {
			out = append(out, fmt.Sprintf("node %s: table %s is rendered but not in the kernel", node, name))
			continue
		}
		for _, c := range r[name].ChainNames() {
			kc := kt.Chains[c]
			if kc == nil {
				out = append(out, fmt.Sprintf("node %s: table %s chain %s is rendered but not in the kernel", node, name, c))
				continue
			}
			if d := firstDifference(ruleTexts(kc), ruleTexts(r[name].Chains[c])); d != "" {
				out = append(out, fmt.Sprintf("node %s: table %s chain %s: the kernel's rules differ from the rendered ones: %s", node, name, c, d))
			}
		}
	}
	for _, name := range sortedKeys(k) {
		if r[name] == nil {
			out = append(out, fmt.Sprintf("node %s: table %s is in the kernel but not rendered", node, name))
		}
	}
	return out
}

// firstDifference describes the first rule where kernel and rendered
// differ ("" when they are equal).
func firstDifference(kernel, rendered []string) string {
	for i := range max(len(kernel), len(rendered)) {
		k, r := "(none)", "(none)"
		if i < len(kernel) {
			k = strconv.Quote(kernel[i])
		}
		if i < len(rendered) {
			r = strconv.Quote(rendered[i])
		}
		if k != r {
			return fmt.Sprintf("rule %d is %s in the kernel, %s rendered", i, k, r)
		}
	}
	return ""
}

// ruleTexts are a chain's rules as the simulator shows them.
func ruleTexts(c *nft.Chain) []string {
	var out []string
	for _, r := range c.Rules {
		t := r.Source
		if t == "" {
			t = r.Render(ipfamily.IPv4)
		}
		out = append(out, t)
	}
	return out
}
