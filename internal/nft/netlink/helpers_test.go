package netlink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
)

// testCtx returns a context bounded for one kernel test.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openNS makes a throwaway namespace and a connection into it.
func openNS(t *testing.T, role string) (*netns.NS, *Conn) {
	t.Helper()
	ns := netnstest.New(t, role)
	c, err := New(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ns, c
}

// nftCmd runs nft in ns and returns its output.
func nftCmd(t *testing.T, ns *netns.NS, args ...string) string {
	t.Helper()
	out, err := ns.Command(append([]string{"nft"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// applyFake applies tx to a fresh fake and returns the resulting table.
func applyFake(t *testing.T, txs ...*nft.Tx) *nft.Fake {
	t.Helper()
	k := nft.NewFake()
	for _, tx := range txs {
		if err := k.Apply(context.Background(), tx); err != nil {
			t.Fatalf("fake: %v", err)
		}
	}
	return k
}
