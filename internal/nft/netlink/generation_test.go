package netlink

import (
	"errors"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

func TestGeneration(t *testing.T) {
	ns, c := openNS(t, "nlgen")
	ctx := testCtx(t)
	gen := func() uint32 {
		t.Helper()
		g, err := c.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := gen()
	if g2 := gen(); g2 != g {
		t.Fatalf("generation moved from %d to %d with no change", g, g2)
	}
	for i, tx := range []*nft.Tx{exampleTx(), func() *nft.Tx {
		tx := nft.NewTx(ipfamily.IPv4, "t")
		tx.FlushChain("svc/a:b")
		return tx
	}()} {
		if err := c.Apply(ctx, tx); err != nil {
			t.Fatal(err)
		}
		g2 := gen()
		if g2 == g {
			t.Fatalf("apply %d: generation still %d", i, g)
		}
		g = g2
	}
	// An empty transaction sends nothing.
	if err := c.Apply(ctx, nft.NewTx(ipfamily.IPv4, "t")); err != nil {
		t.Fatal(err)
	}
	if g2 := gen(); g2 != g {
		t.Errorf("empty transaction moved the generation from %d to %d", g, g2)
	}
	// Someone else's commit in the same namespace.
	nftCmd(t, ns, "add", "table", "ip", "other")
	if g2 := gen(); g2 == g {
		t.Fatalf("outside nft add table: generation still %d", g)
	}
}

func TestReadMissingTable(t *testing.T) {
	_, c := openNS(t, "nlmiss")
	ctx := testCtx(t)
	_, err := c.Read(ctx, ipfamily.IPv4, "t")
	if !errors.Is(err, nft.ErrNoTable) {
		t.Fatalf("err = %v, want ErrNoTable", err)
	}
	// The other family's table of the same name is another table.
	if err := c.Apply(ctx, exampleTx()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, ipfamily.IPv6, "t"); !errors.Is(err, nft.ErrNoTable) {
		t.Fatalf("ip6 t: err = %v, want ErrNoTable", err)
	}
	del := nft.NewTx(ipfamily.IPv4, "t")
	del.DeleteTable()
	if err := c.Apply(ctx, del); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, ipfamily.IPv4, "t"); !errors.Is(err, nft.ErrNoTable) || !strings.Contains(err.Error(), "ip t") {
		t.Fatalf("after delete: err = %v, want ErrNoTable naming the table", err)
	}
}

func TestClosed(t *testing.T) {
	_, c := openNS(t, "nlclose")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := c.Apply(ctx, exampleTx()); !errors.Is(err, errClosed) {
		t.Errorf("apply after close: %v", err)
	}
	if _, err := c.Generation(ctx); !errors.Is(err, errClosed) {
		t.Errorf("generation after close: %v", err)
	}
	if _, err := c.Read(ctx, ipfamily.IPv4, "t"); !errors.Is(err, errClosed) {
		t.Errorf("read after close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}
