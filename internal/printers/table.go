package printers

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

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

func (t *table) write(w io.Writer, what string) error {
	if len(t.rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if !t.opts.NoHeaders {
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	}
	for _, r := range t.rows {
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
