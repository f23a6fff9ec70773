package nftables

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
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

func TestRenderGolden(t *testing.T) {
	tables := Render(featureTable())
	golden(t, "features-ip.nft", tables[0].Render())
	golden(t, "features-ip6.nft", tables[1].Render())
	again := Render(featureTable())
	if again[0].Render() != tables[0].Render() {
		t.Fatal("rendering is not deterministic")
	}
}
