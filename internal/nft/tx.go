package nft

import (
	"context"
	"errors"
	"fmt"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// OpKind is the kind of one transaction operation.
type OpKind uint8

const (
	OpAddTable       OpKind = iota + 1 // create the table if missing
	OpDeleteTable                      // delete the table and everything in it
	OpAddChain                         // create Chain (name, hook) if missing; its Rules are ignored
	OpFlushChain                       // remove every rule of chain Name
	OpDeleteChain                      // delete chain Name with its rules; fails if still referenced
	OpAddRule                          // append Rule to chain Name
	OpAddSet                           // create Set (definition only) if missing
	OpFlushSet                         // remove every element of set Name
	OpDeleteSet                        // delete set Name; fails if referenced
	OpAddElements                      // add Elements to set Name; an existing key must map to the same verdict
	OpDeleteElements                   // delete Elements (by key) from set Name; each must exist
	OpCreateTable                      // create the table; fails (EEXIST in the kernel) if it exists
)

// Op is one operation of a transaction.
type Op struct {
	Kind     OpKind
	Name     string // chain or set name
	Chain    *Chain // OpAddChain
	Set      *Set   // OpAddSet
	Rule     *Rule  // OpAddRule
	Elements []Element
}

// Tx is the operations of a transaction on one table: the kernel applies all
// of its operations or none (Conn.Apply commits several Tx, for several
// tables, as one atomic batch). Operations apply in order, so a transaction must remove
// references (elements, jumping rules) before it deletes what they point at.
type Tx struct {
	Family ipfamily.Family
	Table  string
	Ops    []Op
}

// NewTx starts a transaction on table name of family f.
func NewTx(f ipfamily.Family, name string) *Tx { return &Tx{Family: f, Table: name} }

// Len returns the number of operations.
func (tx *Tx) Len() int { return len(tx.Ops) }

func (tx *Tx) AddTable()    { tx.Ops = append(tx.Ops, Op{Kind: OpAddTable}) }
func (tx *Tx) CreateTable() { tx.Ops = append(tx.Ops, Op{Kind: OpCreateTable}) }
func (tx *Tx) DeleteTable() { tx.Ops = append(tx.Ops, Op{Kind: OpDeleteTable}) }
func (tx *Tx) AddChain(c *Chain) {
	tx.Ops = append(tx.Ops, Op{Kind: OpAddChain, Name: c.Name, Chain: c})
}
func (tx *Tx) FlushChain(n string)  { tx.Ops = append(tx.Ops, Op{Kind: OpFlushChain, Name: n}) }
func (tx *Tx) DeleteChain(n string) { tx.Ops = append(tx.Ops, Op{Kind: OpDeleteChain, Name: n}) }
func (tx *Tx) AddRule(chain string, r *Rule) {
	tx.Ops = append(tx.Ops, Op{Kind: OpAddRule, Name: chain, Rule: r})
}
func (tx *Tx) AddSet(s *Set)      { tx.Ops = append(tx.Ops, Op{Kind: OpAddSet, Name: s.Name, Set: s}) }
func (tx *Tx) FlushSet(n string)  { tx.Ops = append(tx.Ops, Op{Kind: OpFlushSet, Name: n}) }
func (tx *Tx) DeleteSet(n string) { tx.Ops = append(tx.Ops, Op{Kind: OpDeleteSet, Name: n}) }
func (tx *Tx) AddElements(set string, els ...Element) {
	if len(els) > 0 {
		tx.Ops = append(tx.Ops, Op{Kind: OpAddElements, Name: set, Elements: els})
	}
}
func (tx *Tx) DeleteElements(set string, els ...Element) {
	if len(els) > 0 {
		tx.Ops = append(tx.Ops, Op{Kind: OpDeleteElements, Name: set, Elements: els})
	}
}

// Conn is the kernel boundary: one netns's nftables, seen one table at a time.
type Conn interface {
	// Apply commits txs (each on its own table; empty ones are skipped) as
	// one atomic batch: the kernel applies all of them or none. On error the
	// kernel is unchanged.
	Apply(ctx context.Context, txs ...*Tx) error
	// Tables returns the names of the family's tables, sorted.
	Tables(ctx context.Context, f ipfamily.Family) ([]string, error)
	// Read returns the table as the kernel holds it, or an error wrapping
	// ErrNoTable. Elements of dynamic sets (affinity) are runtime state and are
	// not returned.
	Read(ctx context.Context, f ipfamily.Family, name string) (*Table, error)
	// Generation returns the ruleset generation, which the kernel bumps on
	// every committed transaction by anyone: a cheap drift detector.
	Generation(ctx context.Context) (uint32, error)
}

// ErrNoTable is returned (wrapped) by Read when the table does not exist.
var ErrNoTable = errors.New("no such table")

// ErrTableExists is returned (wrapped) by the Fake's Apply for OpCreateTable
// on a table that exists; the kernel's answer is EEXIST.
var ErrTableExists = errors.New("table exists")

// ReadTables reads every table of family f whose name keep accepts, in name
// order. A table deleted between the listing and its read is skipped.
func ReadTables(ctx context.Context, c Conn, f ipfamily.Family, keep func(name string) bool) ([]*Table, error) {
	names, err := c.Tables(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list %s tables: %w", f, err)
	}
	var out []*Table
	for _, n := range names {
		if !keep(n) {
			continue
		}
		t, err := c.Read(ctx, f, n)
		if errors.Is(err, ErrNoTable) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s %s: %w", Keyword(f), n, err)
		}
		out = append(out, t)
	}
	return out, nil
}
