package nft

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// ProbeTablePrefix starts the name of every table Probe makes.
const ProbeTablePrefix = "svcnet-probe-"

// probeCleanup bounds the removal of a probe table, which runs even when the
// caller's context is done.
const probeCleanup = 10 * time.Second

var probeSeq atomic.Uint64

// Probe finds out whether the kernel behind c loads every expression of
// examples (Examples(), or a part of it: ExamplesFor) in tables of each of
// families: it commits one scratch table per family, named
// ProbeTablePrefix+"<pid>-<n>", in one batch, and deletes them again. The
// tables' base chains reach the examples only through a rule that never
// matches (`meta mark & 0 == 1`), so they act on no packet while they
// exist; the kernel still checks every rule against the hook it runs
// behind. Nothing else of the ruleset changes, and the tables are gone when
// Probe returns, whether it fails or not (unless the kernel cannot be
// reached to delete them; the error then says so).
//
// When the kernel refuses an example, the error wraps ErrNotSupported and
// names the feature the example needs (Example.Feature) and the example;
// any other failure (no permission, a broken connection) is returned as it
// is, without ErrNotSupported.
func Probe(ctx context.Context, c Conn, families []ipfamily.Family, examples []Example) error {
	fams := slices.Clone(families)
	slices.Sort(fams)
	fams = slices.Compact(fams)
	if len(fams) == 0 || len(examples) == 0 {
		return nil
	}
	name := fmt.Sprintf("%s%d-%d", ProbeTablePrefix, os.Getpid(), probeSeq.Add(1))
	txs := make([]*Tx, len(fams))
	owners := make([][]probeOp, len(fams))
	for i, f := range fams {
		txs[i], owners[i] = buildExampleTx(f, name, examples, true)
	}
	err := c.Apply(ctx, txs...)
	if cerr := removeProbe(ctx, c, fams, name, err == nil); cerr != nil {
		return errors.Join(probeError(fams, owners, err), cerr)
	}
	return probeError(fams, owners, err)
}

// probeError turns the error of committing the probe tables into one that
// names the refused feature.
func probeError(fams []ipfamily.Family, owners [][]probeOp, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if !errors.As(err, &oe) || errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("nftables probe: %w", err)
	}
	i := slices.Index(fams, oe.Family)
	if i < 0 || oe.Op < 0 || oe.Op >= len(owners[i]) {
		return fmt.Errorf("nftables probe: %w", err)
	}
	o := owners[i][oe.Op]
	return fmt.Errorf("%w: kernel lacks %s (%s, family %s): %w", ErrNotSupported, o.feature, o.what, oe.Family, oe.Err)
}

// removeProbe deletes the probe tables: after a commit, all of them; after a
// failed one, those that exist (a failed batch leaves none, unless its fate
// is unknown, as after a broken connection).
func removeProbe(ctx context.Context, c Conn, fams []ipfamily.Family, name string, committed bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeCleanup)
	defer cancel()
	var del []*Tx
	for _, f := range fams {
		if !committed {
			if _, err := c.Read(ctx, f, name); errors.Is(err, ErrNoTable) {
				continue
			}
		}
		tx := NewTx(f, name)
		tx.DeleteTable()
		del = append(del, tx)
	}
	if len(del) == 0 {
		return nil
	}
	if err := c.Apply(ctx, del...); err != nil {
		return fmt.Errorf("nftables probe: remove table %s: %w", name, err)
	}
	return nil
}

// probeOp says what one op of an example transaction exercises: the kernel
// feature, and the example or part of the table.
type probeOp struct{ feature, what string }

// ExampleTx returns the transaction that creates table name of family f
// holding examples: the sets they use, each rule in a regular chain per
// hook, and a base chain per hook that jumps to it. With guarded, that jump
// is behind a match no packet has, as in Probe's tables; without, every
// packet of the hook reaches the examples, as the simulator needs.
func ExampleTx(f ipfamily.Family, name string, examples []Example, guarded bool) *Tx {
	tx, _ := buildExampleTx(f, name, examples, guarded)
	return tx
}

// ExampleRulesChain is the regular chain of an example table that holds the
// rules of examples of hook h.
func ExampleRulesChain(h Hook) string { return h.Type + "-" + h.Hook + "-rules" }

// exampleGuard is a match no packet has: `meta mark & 0 == 1`.
var exampleGuard = MarkMatch{Mask: 0, Value: 1}

// buildExampleTx builds ExampleTx and says what each of its ops exercises. The
// order makes the kernel report a refused example at its own op: the base
// chains and their jumps come first, so that each example rule is checked
// against its hook when it is added (the kernel checks the table on every
// added rule once a first check at commit has failed, and reports the
// message that made it fail).
func buildExampleTx(f ipfamily.Family, name string, examples []Example, guarded bool) (*Tx, []probeOp) {
	tx := NewTx(f, name)
	var ops []probeOp
	add := func(feature, what string) {
		for len(ops) < tx.Len() {
			ops = append(ops, probeOp{feature, what})
		}
	}
	tx.AddTable()
	add("nf_tables", "table")
	tx.AddChain(&Chain{Name: ExampleTarget})
	add("nf_tables", "regular chain")
	var hooks []Hook
	for _, ex := range examples {
		if !slices.Contains(hooks, ex.Hook) {
			hooks = append(hooks, ex.Hook)
		}
	}
	for _, h := range hooks {
		tx.AddChain(&Chain{Name: ExampleRulesChain(h)})
		add("nf_tables", "regular chain")
	}
	for _, h := range hooks {
		what := h.Type + " chain at " + h.Hook
		feature := "nf_tables"
		if h.Type == "nat" {
			feature = "nft_chain_nat"
		}
		tx.AddChain(&Chain{Name: h.Type + "-" + h.Hook, Hook: &h})
		add(feature, what)
		jump := R(JumpTo(ExampleRulesChain(h)))
		if guarded {
			jump = R(exampleGuard, JumpTo(ExampleRulesChain(h)))
		}
		tx.AddRule(h.Type+"-"+h.Hook, jump)
		add("nft_immediate", "jump from the "+what)
	}
	sets := exampleSets(f)
	added := map[string]bool{}
	for _, ex := range examples {
		for _, n := range ex.Sets {
			if added[n] {
				continue
			}
			added[n] = true
			s := sets[n]
			tx.AddSet(s)
			tx.AddElements(n, sortedElements(s)...)
			add(ex.Feature(f), ex.Name)
		}
	}
	for _, ex := range examples {
		tx.AddRule(ExampleRulesChain(ex.Hook), ex.Rule(f).WithComment(ex.Name))
		add(ex.Feature(f), ex.Name)
	}
	return tx, ops
}

// sortedElements returns the elements of s in key order.
func sortedElements(s *Set) []Element {
	out := make([]Element, 0, len(s.Elements))
	for _, k := range sortedKeys(s.Elements) {
		out = append(out, s.Elements[k])
	}
	return out
}
