package nftables

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/ipfamily"
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
	v4, v6 := Render(featureTable(), ipfamily.IPv4), Render(featureTable(), ipfamily.IPv6)
	if len(v4) != 2 || v4[0].Name != TableName || v4[1].Name != ShardTable(0) {
		t.Fatalf("want the main table and one shard, got %d tables", len(v4))
	}
	golden(t, "features-ip.nft", renderAll(v4))
	golden(t, "features-ip6.nft", renderAll(v6))
	if renderAll(Render(featureTable())) != renderAll(v4)+renderAll(v6) {
		t.Fatal("rendering is not deterministic")
	}
}
