package diagram

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/svcnet/svcnet/internal/trace"
)

// The story's sentences, shared by the SVG and the Mermaid renderings.

// wrapAt is the width, in characters, free text (rules, reasons, notes) is
// wrapped at; tuples and rewrites are never wrapped.
const wrapAt = 100

// wrap breaks s into lines of at most n characters at spaces; a word longer
// than n stays whole on its own line. It returns at least one line.
func wrap(s string, n int) []string {
	words := strings.Fields(s)
	if len(words) == 0 {
		return []string{s}
	}
	var lines []string
	cur := words[0]
	for _, w := range words[1:] {
		if utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(w) > n {
			lines = append(lines, cur)
			cur = w
			continue
		}
		cur += " " + w
	}
	return append(lines, cur)
}

// placeKey identifies a place: one lane (participant) per key.
func placeKey(p trace.Place) string {
	name := p.Name
	if name == "" && p.Addr.IsValid() {
		name = p.Addr.String()
	}
	return string(p.Kind) + "\x00" + name
}

// placeName is the place's name as shown on its lane.
func placeName(p trace.Place) string {
	switch {
	case p.Name != "":
		return p.Name
	case p.Addr.IsValid():
		return p.Addr.String()
	}
	return string(p.Kind)
}

// placeDetails are the lines under a place's name: kind, address, netns.
func placeDetails(p trace.Place) []string {
	kind := string(p.Kind)
	if p.Kind == trace.PlacePod && p.Node != "" {
		kind += " on " + p.Node
	}
	lines := []string{kind}
	if p.Addr.IsValid() {
		lines = append(lines, p.Addr.String())
	}
	if p.NetNS != "" {
		lines = append(lines, "netns "+p.NetNS)
	}
	return lines
}

// title is the request in one line.
func title(r trace.Request) string {
	s := fmt.Sprintf("svcnet trace: %s → %s", r.From, r.To)
	switch {
	case r.Service != "" && r.Frontend != "":
		s += fmt.Sprintf(" (Service %s, %s)", r.Service, r.Frontend)
	case r.Service != "":
		s += fmt.Sprintf(" (Service %s)", r.Service)
	}
	return s
}

// packetLine describes the first packet and where the rules came from.
func packetLine(r trace.Request) string {
	s := "first packet " + r.Packet.String()
	if r.EphemeralPort {
		s += " (source port picked as the kernel would)"
	}
	if r.Rules != "" {
		s += "; rules: " + r.Rules
	}
	return s
}

// rewriteHead is "DNAT tcp a:p → b:q ⇒ tcp a:p → c:r".
func rewriteHead(rw trace.Rewrite) string {
	return fmt.Sprintf("%s %s ⇒ %s", rw.Kind, rw.Before, rw.After)
}

// rewriteBy says where and by what the rewrite happened.
func rewriteBy(rw trace.Rewrite) string {
	s := "by " + rw.By
	if rw.Hook != "" {
		s = "at " + rw.Hook + ", " + s
	}
	if rw.Mark != 0 {
		s += fmt.Sprintf(", asked for by mark 0x%x", rw.Mark)
	}
	return s
}

// reverse reports whether rw is a reply's reverse translation.
func reverse(rw trace.Rewrite) bool {
	return rw.Kind == trace.RewriteReverseDst || rw.Kind == trace.RewriteReverseSrc
}

// choiceHead names the endpoint choice.
func choiceHead(c *trace.Choice) string {
	s := "endpoint choice"
	if c.Socket {
		s = "socket load balancer's endpoint choice"
	}
	if c.Service != "" {
		s += " for " + c.Service
	}
	switch {
	case c.Socket && c.Node != "":
		s += " at connect() on " + c.Node
	case c.Node != "":
		s += " at " + c.Node
	}
	return s
}

// choiceSet describes the endpoint set and affinity ("" when neither is known).
func choiceSet(c *trace.Choice) string {
	var parts []string
	if c.Set != "" {
		parts = append(parts, c.Set+" endpoints")
	}
	if c.Affinity != "" {
		parts = append(parts, c.Affinity)
	}
	return strings.Join(parts, "; ")
}

// candidateWhere is the candidate's pod and node, "" when not known.
func candidateWhere(c trace.Candidate) string {
	s := c.Pod
	if c.Node != "" {
		if s != "" {
			s += " on "
		}
		s += c.Node
	}
	if c.Terminating {
		s += " (terminating)"
	}
	return s
}

// verdictHead is "verdict: dropped at node node1".
func verdictHead(v trace.Verdict) string {
	kind := string(v.Kind)
	if kind == "" {
		kind = "no verdict"
	}
	s := "verdict: " + kind
	if v.Place != "" {
		s += " at " + v.Place
	}
	return s
}

// failed reports whether the verdict is a failure (drawn in red).
func failed(v trace.Verdict) bool {
	return v.Kind != trace.Delivered
}

// summaryLine is "2 rewrites, 2 node hops; reply: 2 reverse translations".
func summaryLine(t *trace.Trace) string {
	s := fmt.Sprintf("%s, %s", plural(t.Summary.Rewrites, "rewrite"), plural(t.Summary.NodeHops, "node hop"))
	if len(t.Reply) > 0 {
		s += "; reply: " + plural(t.Summary.ReplyRewrites, "reverse translation")
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// choiceHop is the index in hops where the endpoint choice is drawn: the
// sender's for a choice made at connect() by the socket load balancer,
// else the choosing node's hop, else the first hop with a DNAT, else the
// last hop; -1 when there is no choice or no hop.
func choiceHop(t *trace.Trace) int {
	if t.Choice == nil || len(t.Hops) == 0 {
		return -1
	}
	if t.Choice.Socket {
		return 0
	}
	for i, h := range t.Hops {
		if h.Place.Kind == trace.PlaceNode && h.Place.Name == t.Choice.Node {
			return i
		}
	}
	for i, h := range t.Hops {
		for _, rw := range h.Rewrites {
			if rw.Kind == trace.RewriteDNAT {
				return i
			}
		}
	}
	return len(t.Hops) - 1
}

// lanesOf returns the distinct places of the trace in order of first
// appearance (the forward hops, then the reply's), and each hop's lane.
func lanesOf(t *trace.Trace) (places []trace.Place, index map[string]int) {
	index = map[string]int{}
	add := func(hops []trace.Hop) {
		for _, h := range hops {
			k := placeKey(h.Place)
			if _, ok := index[k]; !ok {
				index[k] = len(places)
				places = append(places, h.Place)
			}
		}
	}
	add(t.Hops)
	add(t.Reply)
	return places, index
}
