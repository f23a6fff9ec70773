package diagram

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/svcnet/svcnet/internal/trace"
)

// svgText is one <text> element as drawn.
type svgText struct {
	text         string
	x, y, size   int
	anchor, fill string
}

// svgDoc is what the tests read back from an SVG with encoding/xml.
type svgDoc struct {
	width, height int
	texts         []svgText
	fills         map[string]int // fill color → count of <rect>s
}

// parseSVG walks b with the XML decoder, failing on any error (so it checks
// the SVG is well-formed), and collects the texts and the rectangles' fills.
func parseSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	doc := svgDoc{fills: map[string]int{}}
	d := xml.NewDecoder(bytes.NewReader(b))
	var cur *svgText
	depth := 0
	for range 1_000_000 {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			if depth != 0 {
				t.Fatalf("svg: %d elements left open", depth)
			}
			if doc.width == 0 || doc.height == 0 {
				t.Fatal("svg: no <svg> root with width and height")
			}
			return doc
		}
		if err != nil {
			t.Fatalf("svg is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			depth++
			at := map[string]string{}
			for _, a := range tok.Attr {
				at[a.Name.Local] = a.Value
			}
			switch tok.Name.Local {
			case "svg":
				doc.width, doc.height = atoi(t, at["width"]), atoi(t, at["height"])
			case "rect":
				doc.fills[at["fill"]]++
			case "text":
				cur = &svgText{x: atoi(t, at["x"]), y: atoi(t, at["y"]), size: atoi(t, at["font-size"]),
					anchor: at["text-anchor"], fill: at["fill"]}
			}
		case xml.CharData:
			if cur != nil {
				cur.text += string(tok)
			}
		case xml.EndElement:
			depth--
			if tok.Name.Local == "text" && cur != nil {
				doc.texts = append(doc.texts, *cur)
				cur = nil
			}
		}
	}
	t.Fatal("svg: too many tokens")
	return doc
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("svg: attribute %q is not an integer: %v", s, err)
	}
	return n
}

// inOneText reports whether s is within a single <text> element.
func (d svgDoc) inOneText(s string) bool {
	for _, x := range d.texts {
		if strings.Contains(x.text, s) {
			return true
		}
	}
	return false
}

// inAllText reports whether s appears in the texts read in order, with
// lines joined (for wrapped free text).
func (d svgDoc) inAllText(s string) bool {
	var all []string
	for _, x := range d.texts {
		all = append(all, x.text)
	}
	return strings.Contains(strings.Join(strings.Fields(strings.Join(all, " ")), " "), strings.Join(strings.Fields(s), " "))
}

func fixtures() map[string]*trace.Trace {
	return map[string]*trace.Trace{"nodeport": nodePortTrace(), "dropped": droppedTrace()}
}

func TestSVGTellsTheStory(t *testing.T) {
	for name, tr := range fixtures() {
		t.Run(name, func(t *testing.T) {
			doc := parseSVG(t, SVG(tr))
			var tuples, names []string
			for _, hops := range [][]trace.Hop{tr.Hops, tr.Reply} {
				for _, h := range hops {
					names = append(names, h.Place.Name)
					tuples = append(tuples, h.Arrive.String())
					if h.Leave != nil {
						tuples = append(tuples, h.Leave.String())
					}
					for _, rw := range h.Rewrites {
						tuples = append(tuples, rw.Before.String(), rw.After.String(), string(rw.Kind))
					}
					if h.Route != nil {
						tuples = append(tuples, h.Route.Text)
					}
				}
			}
			for _, s := range append(names, tuples...) {
				if !doc.inOneText(s) {
					t.Errorf("no <text> shows %q", s)
				}
			}
			for _, s := range []string{verdictHead(tr.Verdict), tr.Verdict.Reason, summaryLine(tr), title(tr.Request)} {
				if !doc.inAllText(s) {
					t.Errorf("the texts do not tell %q", s)
				}
			}
			if tr.Choice != nil {
				for _, c := range tr.Choice.Candidates {
					if !doc.inOneText(c.Endpoint) {
						t.Errorf("the choice table lacks candidate %s", c.Endpoint)
					}
				}
				if !doc.inOneText("← chosen") {
					t.Error("the choice table marks no candidate chosen")
				}
			}
		})
	}
}

func TestSVGNodePortHighlightsRewritesAndReply(t *testing.T) {
	tr := nodePortTrace()
	doc := parseSVG(t, SVG(tr))
	if got := doc.fills[rewriteLook.fill]; got != tr.Summary.Rewrites {
		t.Errorf("%d boxes in the rewrite highlight, want %d", got, tr.Summary.Rewrites)
	}
	if got := doc.fills[reverseLook.fill]; got != tr.Summary.ReplyRewrites {
		t.Errorf("%d boxes in the reverse translation highlight, want %d", got, tr.Summary.ReplyRewrites)
	}
	if doc.fills[chosenFill] != 1 {
		t.Errorf("%d chosen rows shaded, want 1", doc.fills[chosenFill])
	}
	if !doc.inOneText("mark 0x4000") {
		t.Error("the masquerade's mark is not shown")
	}
	if !doc.inOneText("reply:") {
		t.Error("no reply section")
	}
	if doc.fills[okLook.fill] == 0 || doc.fills[failLook.fill] != 0 {
		t.Errorf("a delivered trace is painted %v", doc.fills)
	}
}

func TestSVGDroppedIsRed(t *testing.T) {
	tr := droppedTrace()
	doc := parseSVG(t, SVG(tr))
	found := false
	for _, x := range doc.texts {
		if strings.HasPrefix(x.text, "verdict: dropped") {
			found = true
			if x.fill != failInk {
				t.Errorf("verdict drawn in %s, want red %s", x.fill, failInk)
			}
		}
		if strings.HasPrefix(x.text, "reply:") {
			t.Error("a dropped packet has a reply section")
		}
	}
	if !found {
		t.Fatal("no verdict line")
	}
	if doc.fills[failLook.fill] < 2 { // the hop's end and the verdict
		t.Errorf("%d red boxes, want the drop and the verdict", doc.fills[failLook.fill])
	}
	if doc.fills[rewriteLook.fill] != 0 {
		t.Error("rewrite highlights in a trace without rewrites")
	}
}

func TestSVGDeterministic(t *testing.T) {
	for name, tr := range fixtures() {
		a, b := SVG(tr), SVG(tr)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two renders differ", name)
		}
	}
	if !bytes.Equal(SVG(nodePortTrace()), SVG(nodePortTrace())) {
		t.Error("renders of equal traces differ")
	}
}

// hairpinTrace has a way back to a lane already drawn (right to left on the
// way in) and a hop to the same place (a loop).
func hairpinTrace() *trace.Trace {
	pod := trace.Place{Kind: trace.PlacePod, Name: "default/client-pod & co <x>", Node: "node1", Addr: node1.Addr}
	out := tcp("192.168.1.7:33000", "10.96.0.10:80", 0)
	back := tcp("192.168.1.1:33000", "192.168.1.7:80", 0)
	return &trace.Trace{
		Request: trace.Request{From: "default/client-pod", To: "10.96.0.10:80", Packet: out},
		Hops: []trace.Hop{
			{Place: pod, Arrive: out, Leave: ptr(out)},
			{Place: node1, Arrive: out, Leave: ptr(out)},
			{Place: node1, Arrive: out, Leave: ptr(back), Rewrites: []trace.Rewrite{
				{Kind: trace.RewriteDNAT, By: "svcnet x rule 0", Before: out, After: back}}},
			{Place: pod, Arrive: back, End: `delivered to itself ("hairpin") & done`},
		},
		Verdict: trace.Verdict{Kind: trace.Delivered, Place: "pod", Reason: `<script>alert("x")</script> ]]> &amp;`},
	}
}

// TestSVGFitsAndNothingOverlaps checks the layout: every text lies within
// the canvas and no two texts overlap, with widths at DejaVu Sans Mono's
// advance (0.602em).
func TestSVGFitsAndNothingOverlaps(t *testing.T) {
	all := fixtures()
	all["hairpin"] = hairpinTrace()
	all["empty"] = nil
	for name, tr := range all {
		t.Run(name, func(t *testing.T) {
			doc := parseSVG(t, SVG(tr))
			type box struct{ x0, y0, x1, y1 int }
			var boxes []box
			for _, x := range doc.texts {
				w := (utf8.RuneCountInString(x.text)*x.size*602 + 999) / 1000
				b := box{x.x, x.y - x.size, x.x + w, x.y + 3}
				if x.anchor == "middle" {
					b.x0, b.x1 = x.x-w/2, x.x+w/2
				}
				if b.x0 < 0 || b.y0 < 0 || b.x1 > doc.width || b.y1 > doc.height {
					t.Errorf("text %q at %v is outside the %dx%d canvas", x.text, b, doc.width, doc.height)
				}
				boxes = append(boxes, b)
			}
			for i, a := range boxes {
				for j := i + 1; j < len(boxes); j++ {
					b := boxes[j]
					if a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 {
						t.Errorf("texts %q and %q overlap", doc.texts[i].text, doc.texts[j].text)
					}
				}
			}
		})
	}
}

func TestSVGEscapesText(t *testing.T) {
	tr := hairpinTrace()
	doc := parseSVG(t, SVG(tr))
	for _, s := range []string{tr.Verdict.Reason, tr.Hops[0].Place.Name, tr.Hops[3].End} {
		if !doc.inOneText(s) {
			t.Errorf("%q does not come back from the XML as it was", s)
		}
	}
}

func TestSVGSelfContained(t *testing.T) {
	for name, tr := range fixtures() {
		svg := string(SVG(tr))
		for _, ref := range []string{"href", "url(", "@import", "<image", "<script", "<style"} {
			if strings.Contains(svg, ref) {
				t.Errorf("%s: the svg refers outside itself (%q)", name, ref)
			}
		}
	}
}
