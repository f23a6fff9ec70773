package describe

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/cli-runtime/pkg/printers"
)

// writer writes a description's lines at indentation levels of two spaces,
// escaping terminal control characters, as kubectl's describers do.
type writer struct{ out io.Writer }

// Indentation levels.
const (
	level0 = iota
	level1
	level2
	level3
)

// write writes format at level.
func (w writer) write(level int, format string, a ...any) {
	_ = printers.WriteEscaped(w.out, strings.Repeat("  ", level)+fmt.Sprintf(format, a...))
}

// line writes a's values, space-separated, and a newline, unindented.
func (w writer) line(a ...any) {
	_ = printers.WriteEscaped(w.out, fmt.Sprintln(a...))
}

// flush ends the tab-aligned block written so far (the events table is
// aligned on its own).
func (w writer) flush() {
	if f, ok := w.out.(interface{ Flush() error }); ok {
		_ = f.Flush()
	}
}

// tabbed returns what f writes, its tab-separated cells aligned with
// kubectl's tab stops (minimum width 0, tab width 8, padding 2, spaces).
func tabbed(f func(w writer)) string {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	f(writer{tw})
	_ = tw.Flush()
	return buf.String()
}

// orNone is s, or "<none>" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
