package diagram

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/svcnet/svcnet/internal/trace"
)

// Layout, in px.
const (
	margin     = 16 // around the picture
	padH       = 8  // inside a box, left and right
	padV       = 5  // inside a box, top and bottom
	rowGap     = 10 // between rows
	laneGap    = 28 // between two lanes' header boxes
	arrowPad   = 18 // between an arrow's label and its lanes
	loopW      = 36 // a loop arrow's width (a hop to the same place)
	headerMinW = 120
)

// SVG draws the trace as a self-contained SVG image: a lane per place (its
// box at the top: name, kind, address, netns; a lifeline under it), the
// packet's way as arrows labelled with its tuple and route, every rewrite as
// a highlighted box on its lane, the endpoint choice as a table, the reply's
// way as dashed arrows, the verdict (red when the packet did not get
// through) and a summary line.
//
// Contract: deterministic (the same trace gives the same bytes); all text is
// XML-escaped; no external resource (fonts are named, not fetched); the
// canvas is sized from the content, with text widths estimated at 0.62em per
// character of a monospace font, so nothing is clipped. A nil trace draws as
// an empty one.
func SVG(t *trace.Trace) []byte {
	if t == nil {
		t = &trace.Trace{}
	}
	places, index := lanesOf(t)
	rows := items(t, index)
	headers := make([][]line, len(places))
	for i, p := range places {
		headers[i] = headerLines(p)
	}
	xs, halves := laneCenters(headers, rows)

	c := &canvas{}
	y := margin
	for _, l := range titleLines(t) {
		c.text(margin, y+l.size, "start", l)
		y += lineHeight(l.size)
	}
	y += rowGap

	// Lane headers, all as tall as the tallest.
	top, hh := y, 0
	for _, h := range headers {
		_, lh := linesSize(h)
		hh = max(hh, lh+2*padV)
	}
	for i, h := range headers {
		c.rect(xs[i]-halves[i], top, 2*halves[i], hh, headerFill(places[i].Kind), arrowColor)
		ly := top + padV
		for _, l := range h {
			c.text(xs[i], ly+l.size, "middle", l)
			ly += lineHeight(l.size)
		}
	}
	y = top + hh + 2*rowGap

	lanesRight := margin
	for i := range xs {
		lanesRight = max(lanesRight, xs[i]+halves[i])
	}
	lifeEnd := y
	for _, it := range rows {
		switch it.kind {
		case itemBox:
			w := boxWidth(it.lines)
			x := max(margin, xs[it.lane]-w/2)
			y += c.box(x, y, it.lines, it.look) + rowGap
			lifeEnd = y
		case itemArrow:
			y = drawArrow(c, it, xs, y)
			lifeEnd = y
		case itemSection:
			y += rowGap
			c.segment(margin, y, max(lanesRight, c.maxX), y, mutedColor, true, false)
			for _, l := range it.lines {
				y += lineHeight(l.size)
				c.text(margin, y, "start", l)
			}
			y += 2 * rowGap
		case itemVerdict:
			y += rowGap
			y += c.box(margin, y, it.lines, it.look) + rowGap
		}
	}
	for i := range xs {
		c.segment(xs[i], top+hh, xs[i], lifeEnd, "#94a3b8", true, true)
	}
	foot := small(summaryLine(t))
	c.text(margin, y+foot.size, "start", foot)
	y += lineHeight(foot.size)

	w, h := c.maxX+margin, max(c.maxY, y)+margin
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" xml:space="preserve">`+"\n",
		w, h, w, h, escape(fontFamily))
	fmt.Fprintf(&b, "<title>%s</title>\n", escape(title(t.Request)))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	b.WriteString(c.back.String())
	b.WriteString(c.front.String())
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// titleLines are the request: what was traced, the first packet, the
// tracer's notes.
func titleLines(t *trace.Trace) []line {
	ls := []line{{text: title(t.Request), size: sizeTitle, bold: true}, text(packetLine(t.Request))}
	for _, n := range t.Request.Notes {
		ls = append(ls, wrapped("note: "+n, small(""))...)
	}
	return ls
}

// headerLines are a lane's box: the place's name and details.
func headerLines(p trace.Place) []line {
	ls := []line{{text: placeName(p), size: sizeName, bold: true}}
	for _, d := range placeDetails(p) {
		ls = append(ls, small(d))
	}
	return ls
}

func headerFill(k trace.PlaceKind) string {
	switch k {
	case trace.PlaceExternal:
		return "#e0f2fe"
	case trace.PlacePod:
		return "#ecfccb"
	}
	return "#f1f5f9"
}

// laneCenters places the lanes left to right: far enough apart for their
// header boxes and for the label of every arrow between them. It returns
// each lane's center and half its header box's width.
func laneCenters(headers [][]line, rows []item) (xs, halves []int) {
	n := len(headers)
	if n == 0 {
		return nil, nil
	}
	halves = make([]int, n)
	for i, h := range headers {
		halves[i] = (max(boxWidth(h), headerMinW) + 1) / 2
	}
	sep := make([]int, n-1) // sep[i]: from lane i's center to lane i+1's
	for i := range sep {
		sep[i] = halves[i] + halves[i+1] + laneGap
	}
	type span struct{ a, b, d int }
	var spans []span
	for _, it := range rows {
		if it.kind != itemArrow {
			continue
		}
		wa, _ := linesSize(it.above)
		wb, _ := linesSize(it.below)
		d := max(wa, wb) + 2*arrowPad
		a, b := min(it.from, it.to), max(it.from, it.to)
		if a == b {
			if a+1 < n {
				spans = append(spans, span{a, a + 1, loopW + d})
			}
			continue
		}
		spans = append(spans, span{a, b, d})
	}
	// Narrow spans first: widening a wide span's last gap then also serves
	// the narrow ones inside it.
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].b-spans[i].a < spans[j].b-spans[j].a })
	for _, s := range spans {
		cur := 0
		for _, d := range sep[s.a:s.b] {
			cur += d
		}
		if cur < s.d {
			sep[s.b-1] += s.d - cur
		}
	}
	xs = make([]int, n)
	xs[0] = margin + halves[0]
	for i := 1; i < n; i++ {
		xs[i] = xs[i-1] + sep[i-1]
	}
	return xs, halves
}

// drawArrow draws an arrow row starting at y and returns the next row's y.
func drawArrow(c *canvas, it item, xs []int, y int) int {
	_, ha := linesSize(it.above)
	ay := y + ha + 4 // the arrow's height
	x1, x2 := xs[it.from], xs[it.to]
	mid, anchor := (x1+x2)/2, "middle"
	if x1 == x2 {
		// A loop to the same lane: out, down, back; labels right of it.
		mid, anchor = x1+loopW+arrowPad/2, "start"
		c.segment(x1, ay, x1+loopW, ay, arrowColor, it.dashed, false)
		c.segment(x1+loopW, ay, x1+loopW, ay+12, arrowColor, it.dashed, false)
		c.segment(x1+loopW, ay+12, x1+2, ay+12, arrowColor, it.dashed, false)
		c.head(x1+2, ay+12, -1, arrowColor)
		ay += 12
	} else {
		dir := 1
		if x2 < x1 {
			dir = -1
		}
		c.segment(x1, ay, x2-2*dir, ay, arrowColor, it.dashed, false)
		c.head(x2-2*dir, ay, dir, arrowColor)
	}
	ly := y
	for _, l := range it.above {
		ly += lineHeight(l.size)
		c.text(mid, ly-4, anchor, l)
	}
	ly = ay + 4
	for _, l := range it.below {
		ly += lineHeight(l.size)
		c.text(mid, ly-4, anchor, l)
	}
	return ly + rowGap
}
