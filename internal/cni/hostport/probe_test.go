package hostport

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// refuseRules returns a Fake.FailOp refusing rules that hold an expression
// of type T.
func refuseRules[T nft.Expr](err error) func(*nft.Tx, int) error {
	return func(tx *nft.Tx, i int) error {
		op := tx.Ops[i]
		if op.Kind == nft.OpAddRule && slices.ContainsFunc(op.Rule.Exprs, func(e nft.Expr) bool { _, ok := e.(T); return ok }) {
			return err
		}
		return nil
	}
}

// The hostport probe covers what hostport rules use and nothing else: a
// kernel refusing dnat fails it, naming nft_nat; one refusing numgen (which
// hostports never use) does not; either way the fake ends empty.
func TestManagerProbe(t *testing.T) {
	both := []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	k := nft.NewFake()
	m := NewManager(k)
	if err := m.Probe(ctx(), both); err != nil {
		t.Fatalf("probe: %v", err)
	}
	k.FailOp = refuseRules[nft.DNAT](errors.New("no such file or directory"))
	err := m.Probe(ctx(), both)
	if !errors.Is(err, nft.ErrNotSupported) || !strings.Contains(err.Error(), "kernel lacks nft_nat (dnat to address and port, family IPv4)") {
		t.Errorf("probe refusing dnat: %v", err)
	}
	k.FailOp = refuseRules[nft.Random](errors.New("no such file or directory"))
	if err := m.Probe(ctx(), both); err != nil {
		t.Errorf("probe refusing numgen: %v", err)
	}
	for _, f := range both {
		if names, _ := k.Tables(ctx(), f); len(names) != 0 {
			t.Errorf("%s tables left: %v", f, names)
		}
	}
}
