package nftrace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
)

// Handles maps a chain name to the kernel handles of its rules, in rule order:
// Handles[chain][i] is the handle of the rule at index i of the chain, the
// index package nft models rules by. Chains without rules are absent.
type Handles map[string][]uint64

// Index returns the index of the rule with handle h in chain, or -1 (not a
// rule of that chain, or handle 0 as on policy and end-of-chain events).
func (h Handles) Index(chain string, handle uint64) int {
	if handle == 0 {
		return -1
	}
	for i, x := range h[chain] {
		if x == handle {
			return i
		}
	}
	return -1
}

// HandlesOf returns the rule handles of a table read back from the kernel
// (nft.Rule.Handle, by chain, in rule order). Rules without a handle (0:
// a rendered table, or the marker Read appends for a base chain's policy)
// are left out; Read puts the policy marker last, so indexes still agree.
func HandlesOf(t *nft.Table) Handles {
	out := Handles{}
	for name, c := range t.Chains {
		for _, r := range c.Rules {
			if r.Handle != 0 {
				out[name] = append(out[name], r.Handle)
			}
		}
	}
	return out
}

// readTimeout bounds RuleHandles' read of a table.
const readTimeout = time.Minute

// RuleHandles reads, in ns, the rule handles of every chain of the table
// (f, table), in rule order, from the ordinary read-back of the table
// (netlink.Conn.Read; see HandlesOf). It fails if the table does not
// exist. Every table can be read, whatever expressions it uses: a rule
// Read cannot decompile still comes back with its handle.
//
// Handles are stable for a rule's lifetime but a rule replaced by a new
// transaction gets a new one: read them from the same ruleset generation the
// events were produced by (in practice: right after collecting them, with no
// ruleset change in between).
func RuleHandles(ns *netns.NS, f ipfamily.Family, table string) (Handles, error) {
	if ns == nil {
		return nil, fmt.Errorf("rule handles of table %s %s: no network namespace given", nft.Keyword(f), table)
	}
	conn, err := netlink.New(ns)
	if err != nil {
		return nil, fmt.Errorf("rule handles of table %s %s: %w", nft.Keyword(f), table, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	t, err := conn.Read(ctx, f, table)
	if errors.Is(err, nft.ErrNoTable) {
		return nil, fmt.Errorf("rule handles of table %s %s: no such table", nft.Keyword(f), table)
	}
	if err != nil {
		return nil, fmt.Errorf("rule handles of table %s %s: %w", nft.Keyword(f), table, err)
	}
	return HandlesOf(t), nil
}
