package netlink

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
)

var bothFamilies = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}

// rulesetOf lists the namespace's whole ruleset.
func rulesetOf(t *testing.T, ns *netns.NS) string {
	t.Helper()
	return nftCmd(t, ns, "list", "ruleset")
}

// TestProbeKernel probes the kernel with every example in both families,
// in a namespace that holds another table: the probe passes, and leaves the
// ruleset as it found it.
func TestProbeKernel(t *testing.T) {
	ns, c := openNS(t, "nlprobe")
	ctx := testCtx(t)
	if err := c.Apply(ctx, everyExprTx(ipfamily.IPv4), everyExprTx(ipfamily.IPv6)); err != nil {
		t.Fatal(err)
	}
	before := rulesetOf(t, ns)
	gen, err := c.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := nft.Probe(ctx, c, bothFamilies, nft.Examples()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	t.Logf("probe of %d examples in 2 families: %v", len(nft.Examples()), time.Since(start))
	if d := cmp.Diff(before, rulesetOf(t, ns)); d != "" {
		t.Errorf("ruleset changed (-before +after):\n%s", d)
	}
	// Two batches: the tables, their removal.
	if after, err := c.Generation(ctx); err != nil || after != gen+2 {
		t.Errorf("generation %d → %d (%v), want two commits", gen, after, err)
	}
}

// TestProbeKernelRefused probes with an example the kernel refuses (a
// masquerade behind a filter chain, which nft_masq does not allow) among
// the valid ones: the error names that example's feature and wraps
// nft.ErrNotSupported, and the ruleset is as before.
func TestProbeKernelRefused(t *testing.T) {
	ns, c := openNS(t, "nlprobebad")
	ctx := testCtx(t)
	if err := c.Apply(ctx, exampleTx()); err != nil {
		t.Fatal(err)
	}
	before := rulesetOf(t, ns)
	bad := nft.Example{
		Name: "masquerade behind a filter chain", Kernel: "nft_masq",
		Hook: nft.Hook{Type: "filter", Hook: "input", Priority: 0},
		Rule: func(ipfamily.Family) *nft.Rule { return nft.R(nft.Masquerade{}) },
	}
	exs := nft.Examples()
	exs = slices.Insert(exs, len(exs)/2, bad)
	for _, f := range bothFamilies {
		err := nft.Probe(ctx, c, []ipfamily.Family{f}, exs)
		if !errors.Is(err, nft.ErrNotSupported) {
			t.Fatalf("%s: probe: %v, want an error wrapping ErrNotSupported", f, err)
		}
		want := "kernel lacks nft_masq (masquerade behind a filter chain, family " + f.String() + "): operation not supported"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not contain %q", f, err, want)
		}
		if d := cmp.Diff(before, rulesetOf(t, ns)); d != "" {
			t.Errorf("%s: ruleset changed (-before +after):\n%s", f, d)
		}
	}
}
