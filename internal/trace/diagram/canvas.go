package diagram

import (
	"encoding/xml"
	"fmt"
	"strings"
	"unicode/utf8"
)

// SVG drawing primitives on integer coordinates. A canvas has two layers
// (lifelines behind, everything else in front) and tracks the extent of what
// was drawn, from which the picture's size is taken.

// line is one line of text.
type line struct {
	text string
	size int    // font size in px
	bold bool   //
	ink  string // text color; "" is the default ink
	bg   string // a background band behind the line (a chosen table row)
}

// look is how a box is painted.
type look struct{ fill, stroke, ink string }

// The palette.
const (
	inkColor    = "#1f2937"
	mutedColor  = "#475569"
	arrowColor  = "#334155"
	rewriteFill = "#ffe08a" // a rewrite on the way in: the highlight
	chosenFill  = "#bbf7d0"
	failInk     = "#b91c1c"
)

var (
	rewriteLook = look{fill: rewriteFill, stroke: "#b45309", ink: inkColor}
	reverseLook = look{fill: "#c7d2fe", stroke: "#4338ca", ink: inkColor}
	choiceLook  = look{fill: "#f8fafc", stroke: "#64748b", ink: inkColor}
	noteLook    = look{fill: "#f1f5f9", stroke: "#94a3b8", ink: inkColor}
	okLook      = look{fill: "#dcfce7", stroke: "#15803d", ink: "#14532d"}
	failLook    = look{fill: "#fee2e2", stroke: failInk, ink: failInk}
)

// fontFamily is monospace: the layout estimates text widths from character
// counts. Only locally installed fonts are named; nothing is fetched.
const fontFamily = "DejaVu Sans Mono, Menlo, Consolas, monospace"

// textWidth estimates the width of l in px: 0.62em per character (a
// monospace advance is about 0.6em), rounded up.
func textWidth(l line) int {
	return (utf8.RuneCountInString(l.text)*l.size*62 + 99) / 100
}

// lineHeight is the height of a line of text of the given size.
func lineHeight(size int) int { return size + 5 }

// linesSize returns the widest line's width and the lines' total height.
func linesSize(ls []line) (w, h int) {
	for _, l := range ls {
		w = max(w, textWidth(l))
		h += lineHeight(l.size)
	}
	return w, h
}

type canvas struct {
	back, front strings.Builder
	maxX, maxY  int
}

func (c *canvas) extend(x, y int) {
	c.maxX, c.maxY = max(c.maxX, x), max(c.maxY, y)
}

// rect draws a box with its top left corner at x, y.
func (c *canvas) rect(x, y, w, h int, fill, stroke string) {
	c.extend(x+w, y+h)
	fmt.Fprintf(&c.front, `<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s"`, x, y, w, h, fill)
	if stroke != "" {
		fmt.Fprintf(&c.front, ` stroke="%s" stroke-width="1.5"`, stroke)
	}
	c.front.WriteString("/>\n")
}

// band draws a plain filled rectangle (a table row's background).
func (c *canvas) band(x, y, w, h int, fill string) {
	c.extend(x+w, y+h)
	fmt.Fprintf(&c.front, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", x, y, w, h, fill)
}

// segment draws a straight line on the front layer, or on the back layer
// when behind is set; dashed for the reply.
func (c *canvas) segment(x1, y1, x2, y2 int, color string, dashed, behind bool) {
	c.extend(max(x1, x2), max(y1, y2))
	b := &c.front
	if behind {
		b = &c.back
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"`, x1, y1, x2, y2, color)
	if dashed {
		b.WriteString(` stroke-dasharray="6 4"`)
	}
	b.WriteString("/>\n")
}

// head draws an arrowhead whose tip is at x, y, pointing right (dir 1) or
// left (dir -1).
func (c *canvas) head(x, y, dir int, color string) {
	c.extend(x, y+5)
	fmt.Fprintf(&c.front, `<polygon points="%d,%d %d,%d %d,%d" fill="%s"/>`+"\n",
		x, y, x-10*dir, y-5, x-10*dir, y+5, color)
}

// text draws l with its baseline at y, starting at x (anchor "start") or
// centered on x (anchor "middle").
func (c *canvas) text(x, y int, anchor string, l line) {
	w := textWidth(l)
	if anchor == "middle" {
		c.extend(x+(w+1)/2, y+4)
	} else {
		c.extend(x+w, y+4)
	}
	ink := l.ink
	if ink == "" {
		ink = inkColor
	}
	fmt.Fprintf(&c.front, `<text x="%d" y="%d" font-size="%d" fill="%s"`, x, y, l.size, ink)
	if l.bold {
		c.front.WriteString(` font-weight="bold"`)
	}
	if anchor == "middle" {
		c.front.WriteString(` text-anchor="middle"`)
	}
	c.front.WriteString(">")
	c.front.WriteString(escape(l.text))
	c.front.WriteString("</text>\n")
}

// box draws lines in a padded box with its top left corner at x, y and
// returns its height.
func (c *canvas) box(x, y int, ls []line, lk look) int {
	w, h := linesSize(ls)
	w, h = w+2*padH, h+2*padV
	c.rect(x, y, w, h, lk.fill, lk.stroke)
	ly := y + padV
	for _, l := range ls {
		lh := lineHeight(l.size)
		if l.bg != "" {
			c.band(x+2, ly, w-4, lh, l.bg)
		}
		if l.ink == "" {
			l.ink = lk.ink
		}
		c.text(x+padH, ly+l.size, "start", l)
		ly += lh
	}
	return h
}

// boxWidth is the width box draws lines at.
func boxWidth(ls []line) int {
	w, _ := linesSize(ls)
	return w + 2*padH
}

// escape makes s safe as XML character data or attribute value.
func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
