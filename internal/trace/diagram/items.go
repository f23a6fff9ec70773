package diagram

import (
	"fmt"
	"strings"

	"github.com/svcnet/svcnet/internal/trace"
)

// The SVG's rows: the trace told top to bottom, one row per box or arrow, so
// no two rows share a height and nothing overlaps however wide it is.

type itemKind int

const (
	itemBox     itemKind = iota // lines in a box on a lane
	itemArrow                   // an arrow between two lanes (or a loop on one)
	itemSection                 // a rule across the lanes with a heading
	itemVerdict                 // the verdict, under the lanes
)

type item struct {
	kind         itemKind
	lane         int // itemBox
	from, to     int // itemArrow
	dashed       bool
	above, below []line // itemArrow: over and under the arrow
	lines        []line // itemBox, itemSection, itemVerdict
	look         look
}

// Font sizes.
const (
	sizeTitle = 14
	sizeName  = 13
	sizeText  = 12
	sizeSmall = 10
)

func text(s string) line  { return line{text: s, size: sizeText} }
func small(s string) line { return line{text: s, size: sizeSmall, ink: mutedColor} }

// wrapped is s wrapped into lines like proto.
func wrapped(s string, proto line) []line {
	var ls []line
	for _, w := range wrap(s, wrapAt) {
		l := proto
		l.text = w
		ls = append(ls, l)
	}
	return ls
}

// items tells the trace as rows; lane maps a place key to its lane.
func items(t *trace.Trace, lane map[string]int) []item {
	var its []item
	its = append(its, hopItems(t, t.Hops, lane, false)...)
	if len(t.Reply) > 0 {
		its = append(its, item{kind: itemSection, lines: []line{
			{text: "reply: the way back, translated back by conntrack", size: sizeText, bold: true, ink: mutedColor}}})
		its = append(its, hopItems(t, t.Reply, lane, true)...)
	}
	v := item{kind: itemVerdict, look: okLook}
	if failed(t.Verdict) {
		v.look = failLook
	}
	v.lines = append(v.lines, line{text: verdictHead(t.Verdict), size: sizeText, bold: true})
	if t.Verdict.Reason != "" {
		v.lines = append(v.lines, wrapped(t.Verdict.Reason, text(""))...)
	}
	return append(its, v)
}

// hopItems tells one way (the packet's or the reply's).
func hopItems(t *trace.Trace, hops []trace.Hop, lane map[string]int, reply bool) []item {
	var its []item
	chooseAt := -1
	if !reply {
		chooseAt = choiceHop(t)
	}
	for i, h := range hops {
		at := lane[placeKey(h.Place)]
		if i == 0 && (h.Leave == nil || *h.Leave != h.Arrive) {
			its = append(its, item{kind: itemBox, lane: at, look: noteLook,
				lines: []line{text(fmt.Sprintf("%s sends %s", placeName(h.Place), h.Arrive))}})
		}
		if i == chooseAt {
			its = append(its, item{kind: itemBox, lane: at, look: choiceLook, lines: choiceLines(t.Choice)})
		}
		for _, rw := range h.Rewrites {
			its = append(its, rewriteItem(rw, at))
		}
		leave := h.Arrive
		if h.Leave != nil {
			leave = *h.Leave
		}
		switch {
		case i+1 < len(hops):
			its = append(its, arrowItem(h, leave, hops[i+1], at, lane[placeKey(hops[i+1].Place)], reply))
		case h.Leave != nil:
			ls := []line{text("leaves as " + leave.String())}
			if h.Route != nil {
				ls = append(ls, wrapped(fmt.Sprintf("toward %s; route: %s", h.Route.Next, h.Route.Text), small(""))...)
			}
			its = append(its, item{kind: itemBox, lane: at, look: noteLook, lines: ls})
		}
		if h.End != "" {
			its = append(its, item{kind: itemBox, lane: at, look: endLook(h.End), lines: wrapped(h.End, text(""))})
		}
	}
	return its
}

// rewriteItem is a rewrite's highlighted box.
func rewriteItem(rw trace.Rewrite, at int) item {
	lk := rewriteLook
	if reverse(rw) {
		lk = reverseLook
	}
	ls := []line{{text: rewriteHead(rw), size: sizeText, bold: true}}
	ls = append(ls, wrapped(rewriteBy(rw), text(""))...)
	if rw.Rule != "" && !strings.Contains(rw.By, rw.Rule) {
		ls = append(ls, wrapped("rule: "+rw.Rule, line{size: sizeSmall})...)
	}
	return item{kind: itemBox, lane: at, look: lk, lines: ls}
}

// arrowItem is the arrow from hop h (lane from) to the next hop (lane to),
// labelled with the tuple as it leaves, the route under it.
func arrowItem(h trace.Hop, leave trace.Tuple, next trace.Hop, from, to int, reply bool) item {
	it := item{kind: itemArrow, from: from, to: to, dashed: reply, above: []line{text(leave.String())}}
	if next.Arrive != leave {
		it.below = append(it.below, line{text: "arrives as " + next.Arrive.String(), size: sizeSmall})
	}
	if r := h.Route; r != nil {
		it.below = append(it.below, wrapped("route: "+r.Text, small(""))...)
		link := r.Link
		if next.In != "" {
			if link != "" {
				link += ", "
			}
			link += "in on " + next.In
		}
		if link != "" {
			it.below = append(it.below, wrapped(link, small(""))...)
		}
	}
	return it
}

// choiceLines is the endpoint choice as a table: one row per candidate,
// the chosen one marked and shaded.
func choiceLines(c *trace.Choice) []line {
	ls := []line{{text: choiceHead(c), size: sizeText, bold: true}}
	if s := choiceSet(c); s != "" {
		ls = append(ls, wrapped(s, small(""))...)
	}
	we, ww := len("endpoint"), len("pod / node")
	for _, cd := range c.Candidates {
		we = max(we, len([]rune(cd.Endpoint)))
		ww = max(ww, len([]rune(candidateWhere(cd))))
	}
	row := func(mark, ep, where, p string) string {
		return strings.TrimRight(fmt.Sprintf("%s %-*s  %-*s  %s", mark, we, ep, ww, where, p), " ")
	}
	ls = append(ls, line{text: row(" ", "endpoint", "pod / node", "probability"), size: sizeText, ink: mutedColor})
	for _, cd := range c.Candidates {
		l := line{text: row(" ", cd.Endpoint, candidateWhere(cd), cd.Probability), size: sizeText}
		if cd.Chosen {
			l = line{text: row("▸", cd.Endpoint, candidateWhere(cd), cd.Probability+"  ← chosen"), size: sizeText, bold: true, bg: chosenFill}
		}
		ls = append(ls, l)
	}
	return ls
}

// endLook paints a hop's end by what it says.
func endLook(end string) look {
	for _, k := range []trace.VerdictKind{trace.Dropped, trace.Rejected, trace.Filtered, trace.Unreachable} {
		if strings.HasPrefix(end, string(k)) {
			return failLook
		}
	}
	if strings.HasPrefix(end, "delivered") || strings.HasPrefix(end, "received") {
		return okLook
	}
	return noteLook
}
