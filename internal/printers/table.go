package printers

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Options select columns and the reference time for AGE.
type Options struct {
	Wide          bool
	AllNamespaces bool // adds a NAMESPACE column first
	Now           time.Time
	// NoHeaders leaves the header line out (--no-headers); ShowLabels adds
	// a LABELS column last (--show-labels); KindPrefix names each object
	// KIND/NAME, as kubectl does when it prints several types.
	NoHeaders, ShowLabels bool
	KindPrefix            string
}

// table collects rows and writes them as kubectl does: upper-case headers, columns
// separated by at least three spaces.
type table struct {
	opts   Options
	header []string
	rows   [][]string
}

func newTable(opts Options, namespaced bool, cols ...string) *table {
	t := &table{opts: opts}
	if namespaced && opts.AllNamespaces {
		t.header = append(t.header, "NAMESPACE")
	}
	t.header = append(t.header, cols...)
	if opts.ShowLabels {
		t.header = append(t.header, "LABELS")
	}
	return t
}

// add appends a row; meta supplies the NAMESPACE cell when that column is shown.
func (t *table) add(meta metav1.Object, namespaced bool, cells ...string) {
	var row []string
	if namespaced && t.opts.AllNamespaces {
		row = append(row, meta.GetNamespace())
	}
	if t.opts.KindPrefix != "" && len(cells) > 0 {
		cells = append([]string{t.opts.KindPrefix + "/" + cells[0]}, cells[1:]...)
	}
	row = append(row, cells...)
	if t.opts.ShowLabels {
		row = append(row, orNone(labels.FormatLabels(meta.GetLabels())))
	}
	t.rows = append(t.rows, row)
}

// write prints the header and rows as text/tabwriter does with kubectl's
// settings (padding 3, spaces): every cell but a line's last is padded to
// its column's widest cell, counted in runes, plus three spaces. It counts
// the widths itself, over the rows it holds, and writes each line once: a
// tabwriter would keep a second copy of every cell until it flushed, 4 MB
// of the 30 MB `svcnet get services -A` holds at its peak with 10,000
// Services. A table whose cells a tabwriter reads otherwise (a tab,
// newline, form feed, vertical tab or escape byte in a cell, or lines of
// unequal length) goes through text/tabwriter itself.
func (t *table) write(w io.Writer, what string) error {
	if len(t.rows) == 0 {
		return nil
	}
	lines := t.rows
	if !t.opts.NoHeaders {
		lines = append([][]string{t.header}, t.rows...)
	}
	widths, ok := columnWidths(lines)
	if !ok {
		return t.writeTabs(w, lines, what)
	}
	pad := []byte(strings.Repeat(" ", slices.Max(append(widths, 0))))
	var err error
	for _, line := range lines {
		for j, cell := range line {
			if err == nil {
				_, err = io.WriteString(w, cell)
			}
			if j < len(line)-1 && err == nil {
				_, err = w.Write(pad[:widths[j]-utf8.RuneCountInString(cell)])
			}
		}
		if err == nil {
			_, err = io.WriteString(w, "\n")
		}
	}
	if err != nil {
		return fmt.Errorf("printing %s: %w", what, err)
	}
	return nil
}

// columnWidths returns the width of each column but the last (its widest
// cell in runes, plus three); ok is false when text/tabwriter would read
// the lines otherwise than as equal rows of plain cells.
func columnWidths(lines [][]string) (widths []int, ok bool) {
	n := len(lines[0])
	if n == 0 {
		return nil, false
	}
	widths = make([]int, n-1)
	for _, line := range lines {
		if len(line) != n {
			return nil, false
		}
		for j, cell := range line {
			if !plain(cell) {
				return nil, false
			}
			if j < n-1 {
				widths[j] = max(widths[j], utf8.RuneCountInString(cell)+3)
			}
		}
	}
	return widths, true
}

// plain reports whether cell holds none of the bytes text/tabwriter reads
// as more than text.
func plain(cell string) bool {
	for i := range len(cell) {
		switch cell[i] {
		case '\t', '\n', '\f', '\v', tabwriter.Escape:
			return false
		}
	}
	return true
}

// writeTabs writes lines through text/tabwriter.
func (t *table) writeTabs(w io.Writer, lines [][]string, what string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	for _, r := range lines {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing %s: %w", what, err)
	}
	return nil
}

// age is kubectl's AGE cell.
func age(meta metav1.Object, now time.Time) string {
	return Since(now, meta.GetCreationTimestamp().Time)
}

// Since is kubectl's age of t at now ("3m4s", "5d"), "<unknown>" for the
// zero time.
func Since(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// listWithMore joins up to max items and says how many more there are, as kubectl.
func listWithMore(list []string, count, max int) string {
	ret := strings.Join(list, ",")
	if count > max {
		return fmt.Sprintf("%s + %d more...", ret, count-max)
	}
	if ret == "" {
		return "<unset>"
	}
	return ret
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
