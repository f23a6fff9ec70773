package trace

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/svcnet/svcnet/internal/nft/sim"
)

// steps turns the simulator's trace into the hop's steps and rewrites.
func (w *walk) steps(res sim.Result, reply bool) ([]Step, []Rewrite) {
	var steps []Step
	var rws []Rewrite
	for _, s := range res.Trace {
		if s.Action == sim.ActNoMatch && !w.e.Verbose {
			continue
		}
		steps = append(steps, Step{Hook: string(s.Hook), Table: s.Table, Chain: s.Chain, Rule: s.Rule,
			Text: s.Text, Action: s.Action.String(), Target: s.Target, Detail: s.Detail})
		if s.Before == nil || s.After == nil {
			continue
		}
		if s.Before.Src == s.After.Src && s.Before.Dst == s.After.Dst {
			continue // a mark, or a masquerade to the address the packet already has
		}
		rw := Rewrite{Hook: string(s.Hook), Before: tupleOf(*s.Before), After: tupleOf(*s.After), Rule: s.Text}
		switch s.Action {
		case sim.ActDNAT:
			rw.Kind = RewriteDNAT
			rw.By = fmt.Sprintf("%s %s rule %d", s.Table, s.Chain, s.Rule)
		case sim.ActMasquerade:
			rw.Kind = RewriteSNAT
			rw.By = fmt.Sprintf("%s %s rule %d (masquerade)", s.Table, s.Chain, s.Rule)
			rw.Mark = s.Before.Mark
			if w.e.plane().egress(s.Table, s.Chain) {
				// Not asked for by a mark: the source is a pod and the
				// destination is outside every exempt network.
				rw.By = fmt.Sprintf("%s %s rule %d (%s)", s.Table, s.Chain, s.Rule, egressReason)
				rw.Mark = 0
			}
		case sim.ActConntrack:
			rw.By = "conntrack: " + s.Detail
			dstChanged := s.Before.Dst != s.After.Dst
			switch {
			case reply && dstChanged:
				rw.Kind = RewriteReverseDst
			case reply:
				rw.Kind = RewriteReverseSrc
			case dstChanged:
				rw.Kind = RewriteDNAT
			default:
				rw.Kind = RewriteSNAT
			}
		default:
			continue // a mark: shown as a step, not an address rewrite
		}
		rws = append(rws, rw)
	}
	return steps, rws
}

// egressReason explains a masquerade by svcnet proxy's egress masquerade.
const egressReason = "egress masquerade: a pod's traffic leaving the cluster leaves with the node's address"

// chainIdentity matches svcnet's per-Service chain names:
// KIND-HASH-namespace/name/protocol/port.
var chainIdentity = regexp.MustCompile(`^(service|local|external|endpoint|firewall)-[A-Z2-7]{8}-([^/]+/[^/]+)/([a-z]+)/([^/_]+)`)

// serviceOfChain returns "ns/name:port" for a per-Service chain name.
func serviceOfChain(chain string) (kind, service string, ok bool) {
	m := chainIdentity.FindStringSubmatch(chain)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2] + ":" + m[4] + "/" + m[3], true
}

// describeChoice records the candidates of an enumeration on node nd; nil
// when its rules chose no endpoint.
func (w *walk) describeChoice(nd *NodeNet, outs []sim.Outcome, pick int) *Choice {
	if w.e.plane().proxied {
		return nil
	}
	c := &Choice{Node: nd.Name}
	dnat := false
	for i, o := range outs {
		cand := Candidate{Probability: o.Probability.RatString(), Chosen: i == pick}
		cand.P, _ = o.Probability.Float64()
		if d := dnatOf(o.Result); d != nil {
			dnat = true
			cand.Endpoint = d.After.Dst.String()
			if p := w.e.Net.PodByIP(d.After.Dst.Addr()); p != nil {
				cand.Pod, cand.Node, cand.Terminating = p.Key, p.Node, p.Terminating
			}
		} else {
			cand.Endpoint = "(" + o.Result.Verdict.String() + ")"
		}
		c.Candidates = append(c.Candidates, cand)
	}
	if !dnat {
		return nil
	}
	chosen := outs[pick].Result
	c.Set = "cluster"
	for _, s := range chosen.Trace {
		kind, svc, ok := w.e.plane().service(s.Chain, s.Text)
		if !ok {
			continue
		}
		if c.Service == "" {
			c.Service = svc
		}
		if kind == "local" {
			c.Set = "local"
		}
		if s.Action == sim.ActUpdate {
			c.Affinity = "sessionAffinity ClientIP: " + s.Detail
		}
	}
	for _, cand := range c.Candidates {
		if cand.Terminating {
			c.Set += " (serving terminating endpoints: no ready endpoint left)"
			break
		}
	}
	if c.Affinity == "" && len(c.Candidates) == 1 {
		for _, s := range chosen.Trace {
			if s.Action == sim.ActGoto && strings.Contains(s.Text, "@affinity") {
				c.Affinity = "sessionAffinity ClientIP: the client is remembered, its endpoint is kept"
			}
		}
	}
	return c
}

// endVerdict explains a packet that did not get through node at, running
// data plane p.
func endVerdict(p *Plane, res sim.Result, at Place) Verdict {
	v := Verdict{Place: at.String()}
	var last *sim.Step
	var via string
	for i := range res.Trace {
		s := &res.Trace[i]
		switch s.Action {
		case sim.ActDrop, sim.ActReject:
			last = s
		case sim.ActGoto, sim.ActJump:
			if s.Target == "reject-chain" {
				via = s.Chain
			}
		}
	}
	if res.Verdict == sim.Rejected {
		v.Kind = Rejected
		v.Reason = "answered with " + res.Reject.String()
		switch via {
		case "service-endpoints-check", "nodeport-endpoints-check":
			v.Reason += ": the Service has no endpoints"
		case "cluster-ips-check":
			v.Reason += ": the address is a ClusterIP, but no Service port matches"
		}
	} else {
		v.Kind = Dropped
		v.Reason = "dropped"
		for _, s := range res.Trace {
			if s.Action == sim.ActDrop && (s.Chain == "service-endpoints-check" || s.Chain == "nodeport-endpoints-check") {
				v.Reason = "the Service has no local endpoints for this traffic (traffic policy Local), so the no-endpoint map drops it"
			}
		}
	}
	if last == nil {
		return v
	}
	comment := ruleComment(last.Text)
	if res.Verdict == sim.Rejected && via == "" && strings.Contains(comment, "has no endpoints") {
		v.Reason += ": the Service has no endpoints"
	}
	kind, _, _ := p.service(last.Chain, last.Text)
	switch {
	case kind == "firewall":
		v.Kind = Filtered
		v.Reason = "the source is outside loadBalancerSourceRanges"
	case strings.Contains(comment, "no local endpoints"):
		v.Reason = comment + ": traffic policy Local keeps the packet on this node, and there is no endpoint here"
	case strings.Contains(last.Text, "ct state invalid"), strings.Contains(last.Text, "--ctstate INVALID"):
		v.Reason = "conntrack state invalid (the packet belongs to no connection)"
	case res.Verdict == sim.Dropped && last.Detail != "" && v.Reason == "dropped":
		v.Reason = last.Detail
	}
	v.Reason += fmt.Sprintf(" [%s %s rule %d: %s]", last.Table, last.Chain, last.Rule, last.Text)
	return v
}

// ruleComment extracts the comment of a rendered rule.
func ruleComment(text string) string {
	i := strings.Index(text, `comment "`)
	if i < 0 {
		return ""
	}
	rest := text[i+len(`comment "`):]
	if j := strings.LastIndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return rest
}

// summarize counts rewrites and node hops.
func summarize(tr *Trace) Summary {
	var s Summary
	for _, h := range tr.Hops {
		s.Rewrites += len(h.Rewrites)
		if h.Place.Kind == PlaceNode {
			s.NodeHops++
		}
	}
	for _, h := range tr.Reply {
		s.ReplyRewrites += len(h.Rewrites)
	}
	return s
}
