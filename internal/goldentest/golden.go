// Package goldentest compares test output with golden files under
// testdata/, for _test.go files: `go test ./pkg -update` rewrites them.
package goldentest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Check fails t when testdata/name differs from got, with a diff; with
// -update it writes got to the file first.
func Check(t testing.TB, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Fatalf("%s differs (-want +got):\n%s", p, d)
	}
}
