package nftrace

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft"
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

// dumpRetries bounds the re-reads of a rule dump the kernel marked
// interrupted by a concurrent ruleset change.
const dumpRetries = 5

// RuleHandles reads, in ns, the rule handles of every chain of the table
// (f, table), in rule order. It fails if the table does not exist. It reads
// only the chain and handle of each rule (never decodes expressions), so
// every table can be read, whatever expressions it uses.
//
// Handles are stable for a rule's lifetime but a rule replaced by a new
// transaction gets a new one: read them from the same ruleset generation the
// events were produced by (in practice: right after collecting them, with no
// ruleset change in between).
func RuleHandles(ns *netns.NS, f ipfamily.Family, table string) (Handles, error) {
	fam := f.Proto()
	get := nftRequest(unix.NFT_MSG_GETTABLE, unix.NLM_F_ACK, 1, fam, appendAttr(nil, unix.NFTA_TABLE_NAME, cstring(table)))
	if _, err := exchange(ns, get, false); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("rule handles of table %s %s: no such table", nft.Keyword(f), table)
		}
		return nil, fmt.Errorf("rule handles of table %s %s: %w", nft.Keyword(f), table, err)
	}
	dump := nftRequest(unix.NFT_MSG_GETRULE, unix.NLM_F_DUMP, 2, fam, appendAttr(nil, unix.NFTA_RULE_TABLE, cstring(table)))
	var msgs []nlMsg
	var err error
	for range dumpRetries {
		if msgs, err = exchange(ns, dump, true); !errors.Is(err, errDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("rule handles of table %s %s: %w", nft.Keyword(f), table, err)
	}
	out := Handles{}
	for _, m := range msgs {
		if m.typ != unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWRULE {
			continue
		}
		attrs, err := parseAttrs(m.data[nfgenLen:])
		if err != nil {
			return nil, fmt.Errorf("rule handles of table %s %s: %w", nft.Keyword(f), table, err)
		}
		var tbl, chain string
		var handle uint64
		for _, a := range attrs {
			switch a.typ {
			case unix.NFTA_RULE_TABLE:
				tbl = gostring(a.data)
			case unix.NFTA_RULE_CHAIN:
				chain = gostring(a.data)
			case unix.NFTA_RULE_HANDLE:
				if len(a.data) == 8 {
					handle = binary.BigEndian.Uint64(a.data)
				}
			}
		}
		if tbl != table || chain == "" || handle == 0 {
			continue
		}
		out[chain] = append(out[chain], handle)
	}
	return out, nil
}

// nfproto returns the nfgen family of a table family.
