package userspace

import (
	"testing"

	"github.com/svcnet/svcnet/internal/goldentest"
	"github.com/svcnet/svcnet/internal/ipfamily"
)

// TestRenderGolden renders each feature row alone, in the family of its
// entry, against testdata/<row>.nft.
func TestRenderGolden(t *testing.T) {
	for _, r := range featureRows() {
		t.Run(r.name, func(t *testing.T) {
			fam := r.tbl.Ports[0].Family
			got := renderAll(Render(r.tbl, fixedPorts(r.tbl), fam))
			goldentest.Check(t, r.name+".nft", got)
			if again := renderAll(Render(r.tbl, fixedPorts(r.tbl), fam)); again != got {
				t.Fatal("rendering is not deterministic")
			}
		})
	}
}

// TestRenderBothFamilies: each family's table holds only its entries.
func TestRenderBothFamilies(t *testing.T) {
	rows := featureRows()
	var ports = rows[0].tbl.Ports
	for _, r := range rows[1:] {
		ports = append(ports, r.tbl.Ports...)
	}
	tbl := table(testNode(), ports...)
	tables := Render(tbl, fixedPorts(tbl))
	if len(tables) != 2 || tables[0].Family != ipfamily.IPv4 || tables[1].Family != ipfamily.IPv6 {
		t.Fatalf("want an ip and an ip6 table, got %d", len(tables))
	}
	for _, tb := range tables {
		if tb.Name != TableName {
			t.Errorf("table %s", tb.Name)
		}
	}
	v6 := tables[1].Render()
	for _, c := range []string{chainPortalsContainer, chainNodePortContainer} {
		if n := len(tables[1].Chains[c].Rules); n != 1 {
			t.Errorf("ip6 %s: %d rules, want the one of default/v6:\n%s", c, n, v6)
		}
	}
}
