package diagram

import (
	"fmt"
	"strings"

	"github.com/svcnet/svcnet/internal/trace"
)

// Mermaid tells the trace as a Mermaid sequenceDiagram: a participant per
// place (P1, P2, … in order of first appearance, named "name<br/>kind
// address"), a message per hop labelled with the packet's tuple as it leaves
// (and the route), a note over the place for the endpoint choice and for
// every rewrite, dashed (-->>) messages for the reply, a note for how each
// way ends, and the verdict with the summary as the final note, over all
// participants.
//
// Contract: deterministic; every label goes through mermaidEscape, so
// nothing in a trace (a rule's ";", a "#", a ":") can end a statement, start
// a comment or change the grammar. Lines are indented by four spaces.
func Mermaid(t *trace.Trace) string {
	if t == nil {
		t = &trace.Trace{}
	}
	places, index := lanesOf(t)
	var b strings.Builder
	b.WriteString("sequenceDiagram\n")
	fmt.Fprintf(&b, "    title %s\n", mermaidEscape(title(t.Request)))
	for i, p := range places {
		fmt.Fprintf(&b, "    participant %s as %s\n", mermaidID(i), mermaidLabel(placeName(p), strings.Join(placeDetails(p), " ")))
	}
	id := func(p trace.Place) string { return mermaidID(index[placeKey(p)]) }
	note := func(p trace.Place, lines ...string) {
		fmt.Fprintf(&b, "    Note over %s: %s\n", id(p), mermaidLabel(lines...))
	}
	way := func(hops []trace.Hop, reply bool) {
		chooseAt := -1
		if !reply {
			chooseAt = choiceHop(t)
		}
		arrow := "->>"
		if reply {
			arrow = "-->>"
		}
		for i, h := range hops {
			if i == 0 && (h.Leave == nil || *h.Leave != h.Arrive) {
				note(h.Place, placeName(h.Place)+" sends "+h.Arrive.String())
			}
			if i == chooseAt {
				note(h.Place, choiceText(t.Choice)...)
			}
			for _, rw := range h.Rewrites {
				ls := []string{string(rw.Kind) + " " + rewriteBy(rw), rw.Before.String(), "⇒ " + rw.After.String()}
				if rw.Rule != "" && !strings.Contains(rw.By, rw.Rule) {
					ls = append(ls, "rule: "+rw.Rule)
				}
				note(h.Place, ls...)
			}
			leave := h.Arrive
			if h.Leave != nil {
				leave = *h.Leave
			}
			switch {
			case i+1 < len(hops):
				next := hops[i+1]
				ls := []string{leave.String()}
				if next.Arrive != leave {
					ls = append(ls, "arrives as "+next.Arrive.String())
				}
				if h.Route != nil {
					ls = append(ls, "route: "+h.Route.Text)
				}
				fmt.Fprintf(&b, "    %s%s%s: %s\n", id(h.Place), arrow, id(next.Place), mermaidLabel(ls...))
			case h.Leave != nil:
				ls := []string{"leaves as " + leave.String()}
				if h.Route != nil {
					ls = append(ls, fmt.Sprintf("toward %s; route: %s", h.Route.Next, h.Route.Text))
				}
				note(h.Place, ls...)
			}
			if h.End != "" {
				note(h.Place, h.End)
			}
		}
	}
	way(t.Hops, false)
	way(t.Reply, true)
	over := mermaidID(0)
	if len(places) > 1 {
		over += "," + mermaidID(len(places)-1)
	}
	if len(places) == 0 {
		// A note needs a participant: the verdict gets one of its own.
		b.WriteString("    participant P1 as trace\n")
	}
	ls := []string{verdictHead(t.Verdict)}
	if t.Verdict.Reason != "" {
		ls = append(ls, t.Verdict.Reason)
	}
	ls = append(ls, summaryLine(t))
	fmt.Fprintf(&b, "    Note over %s: %s\n", over, mermaidLabel(ls...))
	return b.String()
}

// mermaidID is the participant id of lane i: P1, P2, … (ids made of a
// letter and digits match no keyword of the grammar).
func mermaidID(i int) string { return fmt.Sprintf("P%d", i+1) }

// choiceText is the endpoint choice as note lines, the chosen one marked.
func choiceText(c *trace.Choice) []string {
	ls := []string{choiceHead(c)}
	if s := choiceSet(c); s != "" {
		ls = append(ls, s)
	}
	for _, cd := range c.Candidates {
		s := cd.Endpoint
		if w := candidateWhere(cd); w != "" {
			s += " " + w
		}
		s += " p=" + cd.Probability
		if cd.Chosen {
			s = "▸ " + s + " ← chosen"
		}
		ls = append(ls, s)
	}
	return ls
}

// mermaidLabel escapes each line and joins them with Mermaid's line break.
func mermaidLabel(lines ...string) string {
	esc := make([]string, len(lines))
	for i, l := range lines {
		esc[i] = mermaidEscape(l)
	}
	return strings.Join(esc, "<br/>")
}

// mermaidEscape replaces the characters Mermaid's sequenceDiagram grammar
// would read as syntax with its entity codes (#NN;, decoded to the character
// when rendered): ";" ends a statement and "#" starts a comment anywhere on a
// line; ":" starts a message's text (and "wrap:"); "%%" starts a comment;
// "<", ">", "&" and '"' would be read as HTML by the renderer. Line breaks
// become spaces.
func mermaidEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '#', ';', ':', '%', '<', '>', '&', '"':
			fmt.Fprintf(&b, "#%d;", r)
		case '\n', '\r':
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
