package printers

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestTableWritesAsTabwriter: the table's own alignment gives, byte for
// byte, what text/tabwriter gives for the same lines (kubectl's
// settings), over random tables of plain cells: empty ones, multi-byte
// runes, invalid UTF-8, one column or several; and lines a tabwriter
// reads otherwise (a tab, newline or escape in a cell, unequal lines) go
// through the tabwriter itself.
func TestTableWritesAsTabwriter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "web", "10.96.0.1", "", "é", "日本", "<none>", "\xfe", " "}
	special := []string{"\t", "\n", "\v", "\f", "\xff"}
	for i := range 2000 {
		cols := 1 + r.IntN(5)
		tab := &table{opts: Options{NoHeaders: r.IntN(4) == 0}}
		for j := range cols {
			tab.header = append(tab.header, strings.Repeat("H", j+1))
		}
		for range 1 + r.IntN(6) {
			row := make([]string, cols)
			for j := range row {
				for range r.IntN(4) {
					row[j] += alphabet[r.IntN(len(alphabet))]
				}
			}
			tab.rows = append(tab.rows, row)
		}
		switch r.IntN(10) {
		case 0:
			row := tab.rows[r.IntN(len(tab.rows))]
			row[r.IntN(cols)] += special[r.IntN(len(special))]
		case 1:
			tab.rows[r.IntN(len(tab.rows))] = append(tab.rows[0][:cols:cols], "extra")
		}
		var got, want bytes.Buffer
		if err := tab.write(&got, "things"); err != nil {
			t.Fatal(err)
		}
		lines := tab.rows
		if !tab.opts.NoHeaders {
			lines = append([][]string{tab.header}, tab.rows...)
		}
		if err := tab.writeTabs(&want, lines, "things"); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("table %d %q:\ngot\n%q\nwant (text/tabwriter)\n%q", i, lines, got.String(), want.String())
		}
	}
}
