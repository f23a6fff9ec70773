package nft

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

var bothFamilies = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}

// ruleset renders every table of the fake, for before/after comparisons.
func ruleset(t *testing.T, k *Fake) string {
	t.Helper()
	var b strings.Builder
	for _, f := range bothFamilies {
		ts, err := ReadTables(context.Background(), k, f, func(string) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range ts {
			b.WriteString(tb.Render())
		}
	}
	return b.String()
}

// refuse returns a FailOp that refuses the rules (of family f, or of any
// family when f is 0) holding an expression for which match holds.
func refuse(f ipfamily.Family, match func(Expr) bool, err error) func(*Tx, int) error {
	return func(tx *Tx, i int) error {
		op := tx.Ops[i]
		if op.Kind != OpAddRule || f != 0 && tx.Family != f || !slices.ContainsFunc(op.Rule.Exprs, match) {
			return nil
		}
		return err
	}
}

func TestProbeFake(t *testing.T) {
	ctx := context.Background()
	k := NewFake()
	if err := k.Apply(ctx, exampleTx()); err != nil {
		t.Fatal(err)
	}
	before := ruleset(t, k)
	applied := k.Applied
	if err := Probe(ctx, k, bothFamilies, Examples()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if d := cmp.Diff(before, ruleset(t, k)); d != "" {
		t.Errorf("ruleset changed (-before +after):\n%s", d)
	}
	if got := k.Applied - applied; got != 2 {
		t.Errorf("probe committed %d transactions, want 2 (the tables, their removal)", got)
	}
}

func TestProbeNamesTheMissingFeature(t *testing.T) {
	isRandom := func(e Expr) bool { _, ok := e.(Random); return ok }
	isFib := func(e Expr) bool { _, ok := e.(FibLocal); return ok }
	isMasq := func(e Expr) bool { _, ok := e.(Masquerade); return ok }
	noExpr := errors.New("no such file or directory")
	for _, tc := range []struct {
		name   string
		fail   func(*Tx, int) error
		want   []string
		unsupp bool
	}{
		{"numgen", refuse(0, isRandom, noExpr),
			[]string{"kernel lacks nft_numgen (numgen random mod, family IPv4): no such file or directory"}, true},
		{"fib in ip6 only", refuse(ipfamily.IPv6, isFib, noExpr),
			[]string{"kernel lacks nft_fib_ipv6 (fib daddr type local, family IPv6)"}, true},
		{"masquerade", refuse(0, isMasq, errors.New("operation not supported")),
			[]string{"kernel lacks nft_masq (masquerade, family IPv4): operation not supported"}, true},
		{"nat chain", func(tx *Tx, i int) error {
			if op := tx.Ops[i]; op.Kind == OpAddChain && op.Chain.Hook != nil && op.Chain.Hook.Type == "nat" {
				return noExpr
			}
			return nil
		}, []string{"kernel lacks nft_chain_nat (nat chain at prerouting, family IPv4)"}, true},
		{"permission", func(tx *Tx, i int) error { return fs.ErrPermission },
			[]string{"nftables probe: table ip svcnet-probe-", "op 0: permission denied"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			k := NewFake()
			if err := k.Apply(ctx, exampleTx()); err != nil {
				t.Fatal(err)
			}
			before := ruleset(t, k)
			k.FailOp = tc.fail
			err := Probe(ctx, k, bothFamilies, Examples())
			if err == nil {
				t.Fatal("probe passed")
			}
			if errors.Is(err, ErrNotSupported) != tc.unsupp {
				t.Errorf("errors.Is(%v, ErrNotSupported) = %t", err, !tc.unsupp)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			k.FailOp = nil
			if d := cmp.Diff(before, ruleset(t, k)); d != "" {
				t.Errorf("ruleset changed (-before +after):\n%s", d)
			}
		})
	}
}

// lostAnswer commits its first Apply but reports it failed, as a connection
// that broke after sending the batch does: the batch's fate is unknown.
type lostAnswer struct {
	*Fake
	lost bool
}

func (c *lostAnswer) Apply(ctx context.Context, txs ...*Tx) error {
	if err := c.Fake.Apply(ctx, txs...); err != nil || c.lost {
		return err
	}
	c.lost = true
	return errors.New("no answer from the kernel")
}

func TestProbeRemovesTablesOfUnknownFate(t *testing.T) {
	c := &lostAnswer{Fake: NewFake()}
	err := Probe(context.Background(), c, bothFamilies, Examples())
	if err == nil || errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "no answer from the kernel") {
		t.Fatalf("probe: %v, want the connection's error", err)
	}
	if got := ruleset(t, c.Fake); got != "" {
		t.Errorf("probe left:\n%s", got)
	}
}

func TestProbeNothingToDo(t *testing.T) {
	k := NewFake()
	k.FailOp = func(*Tx, int) error { return errors.New("touched the kernel") }
	for _, tc := range []struct {
		fams []ipfamily.Family
		exs  []Example
	}{{nil, Examples()}, {bothFamilies, nil}} {
		if err := Probe(context.Background(), k, tc.fams, tc.exs); err != nil {
			t.Errorf("probe of %d families, %d examples: %v", len(tc.fams), len(tc.exs), err)
		}
	}
}

func TestExamplesFor(t *testing.T) {
	tb := NewTable(ipfamily.IPv4, "t")
	tb.Chains["c"] = &Chain{Name: "c", Rules: []*Rule{
		R(ProtoMatch{Proto: ProtoTCP}, DNAT{To: ExampleFlowOf(ipfamily.IPv4).Dst}),
		R(Masquerade{}),
	}}
	var got []string
	for _, ex := range ExamplesFor(tb) {
		got = append(got, ex.Name)
	}
	want := []string{"meta l4proto", "dnat to address and port", "masquerade", "masquerade fully-random"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("examples (-want +got):\n%s", d)
	}
}
