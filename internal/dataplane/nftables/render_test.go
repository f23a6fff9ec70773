package nftables

import (
	"testing"

	"github.com/svcnet/svcnet/internal/goldentest"
	"github.com/svcnet/svcnet/internal/ipfamily"
)

func TestRenderGolden(t *testing.T) {
	v4, v6 := Render(featureTable(), ipfamily.IPv4), Render(featureTable(), ipfamily.IPv6)
	if len(v4) != 2 || v4[0].Name != TableName || v4[1].Name != ShardTable(0) {
		t.Fatalf("want the main table and one shard, got %d tables", len(v4))
	}
	goldentest.Check(t, "features-ip.nft", renderAll(v4))
	goldentest.Check(t, "features-ip6.nft", renderAll(v6))
	if renderAll(Render(featureTable())) != renderAll(v4)+renderAll(v6) {
		t.Fatal("rendering is not deterministic")
	}
}
