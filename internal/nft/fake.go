package nft

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Fake is an in-memory kernel that tracks state as nf_tables does: it checks
// references (a rule may jump only to an existing regular chain and look up
// only existing sets; a referenced chain or set cannot be deleted; an element
// key cannot be re-added with another verdict) and applies each transaction
// atomically. Like the kernel it gives each chain, set and rule it creates
// the next handle of the table's counter (a new table starts at 1) and
// returns the rules' handles on Read. It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	tables map[string]*Table
	// handles is the last handle given out in each table.
	handles map[string]uint64
	gen     uint32
	// FailApply, when set, is called for each non-empty Tx of an Apply; a
	// non-nil error fails the whole Apply (nothing changes).
	FailApply func(tx *Tx) error
	// FailOp, when set, is called for each op of each non-empty Tx of an
	// Apply, before the op applies; a non-nil error fails the whole Apply at
	// that op (an *OpError, as the kernel refuses one message of a batch).
	FailOp func(tx *Tx, op int) error
	// Applied counts committed transactions.
	Applied int
}

// NewFake returns an empty fake kernel.
func NewFake() *Fake { return &Fake{tables: map[string]*Table{}, handles: map[string]uint64{}} }

func tableKey(f ipfamily.Family, name string) string { return Keyword(f) + " " + name }

// Apply implements Conn: all transactions or none.
func (k *Fake) Apply(_ context.Context, txs ...*Tx) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	next := map[string]*Table{}
	nextHandle := map[string]uint64{}
	applied := false
	for _, tx := range txs {
		if tx.Len() == 0 {
			continue
		}
		if k.FailApply != nil {
			if err := k.FailApply(tx); err != nil {
				return err
			}
		}
		key := tableKey(tx.Family, tx.Table)
		t, seen := next[key]
		if !seen {
			if cur := k.tables[key]; cur != nil {
				t = cur.Clone()
			}
			nextHandle[key] = k.handles[key]
		}
		h := nextHandle[key]
		for i, op := range tx.Ops {
			var err error
			if k.FailOp != nil {
				err = k.FailOp(tx, i)
			}
			if err == nil {
				t, err = applyOp(t, &h, tx, op)
			}
			if err != nil {
				return &OpError{Family: tx.Family, Table: tx.Table, Op: i, Err: err}
			}
		}
		next[key], nextHandle[key] = t, h
		applied = true
	}
	if !applied {
		return nil
	}
	for key, t := range next {
		if t == nil {
			delete(k.tables, key)
			delete(k.handles, key)
		} else {
			k.tables[key], k.handles[key] = t, nextHandle[key]
		}
	}
	k.gen++
	k.Applied++
	return nil
}

// Tables implements Conn.
func (k *Fake) Tables(_ context.Context, f ipfamily.Family) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, t := range k.tables {
		if t.Family == f {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Read implements Conn.
func (k *Fake) Read(_ context.Context, f ipfamily.Family, name string) (*Table, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.tables[tableKey(f, name)]
	if t == nil {
		return nil, fmt.Errorf("table %s %s: %w", Keyword(f), name, ErrNoTable)
	}
	c := t.Clone()
	for _, s := range c.Sets {
		if s.Timeout > 0 {
			s.Elements = map[string]Element{}
		}
	}
	return c, nil
}

// Generation implements Conn.
func (k *Fake) Generation(context.Context) (uint32, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gen, nil
}

// Mutate lets a test change the kernel behind the proxy's back (drift), as
// another program would; it bumps the generation.
func (k *Fake) Mutate(f ipfamily.Family, name string, fn func(t *Table) *Table) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := tableKey(f, name)
	var t *Table
	if cur := k.tables[key]; cur != nil {
		t = cur.Clone()
	}
	if t = fn(t); t == nil {
		delete(k.tables, key)
	} else {
		k.tables[key] = t
	}
	k.gen++
}

// applyOp applies op to t (nil: no such table); handle is the table's
// handle counter.
func applyOp(t *Table, handle *uint64, tx *Tx, op Op) (*Table, error) {
	if op.Kind == OpCreateTable && t != nil {
		return nil, fmt.Errorf("create table: %w", ErrTableExists)
	}
	if op.Kind == OpAddTable || op.Kind == OpCreateTable {
		if t == nil {
			t, *handle = NewTable(tx.Family, tx.Table), 0
		}
		return t, nil
	}
	if t == nil {
		return nil, fmt.Errorf("no such table")
	}
	switch op.Kind {
	case OpDeleteTable:
		return nil, nil
	case OpAddChain:
		if _, ok := t.Chains[op.Name]; !ok {
			t.Chains[op.Name] = &Chain{Name: op.Name, Hook: op.Chain.Hook}
			*handle++
		}
	case OpFlushChain:
		c, ok := t.Chains[op.Name]
		if !ok {
			return nil, fmt.Errorf("flush chain %s: no such chain", op.Name)
		}
		c.Rules = nil
	case OpDeleteChain:
		c, ok := t.Chains[op.Name]
		if !ok {
			return nil, fmt.Errorf("delete chain %s: no such chain", op.Name)
		}
		if by := chainUsers(t, op.Name); by != "" {
			return nil, fmt.Errorf("delete chain %s: still referenced by %s", op.Name, by)
		}
		_ = c
		delete(t.Chains, op.Name)
	case OpAddRule:
		c, ok := t.Chains[op.Name]
		if !ok {
			return nil, fmt.Errorf("add rule to %s: no such chain", op.Name)
		}
		if err := checkRule(t, op.Rule); err != nil {
			return nil, fmt.Errorf("add rule to %s: %w", op.Name, err)
		}
		// A copy: the caller's rule keeps handle 0.
		r := *op.Rule
		*handle++
		r.Handle = *handle
		c.Rules = append(c.Rules, &r)
	case OpAddSet:
		if old, ok := t.Sets[op.Name]; ok {
			if old.Verdict != op.Set.Verdict || keyType(t.Family, old.Key) != keyType(t.Family, op.Set.Key) || old.Timeout != op.Set.Timeout {
				return nil, fmt.Errorf("add set %s: exists with another definition", op.Name)
			}
			return t, nil
		}
		s := *op.Set
		s.Elements = map[string]Element{}
		t.Sets[op.Name] = &s
		*handle++
	case OpFlushSet:
		s, ok := t.Sets[op.Name]
		if !ok {
			return nil, fmt.Errorf("flush set %s: no such set", op.Name)
		}
		s.Elements = map[string]Element{}
	case OpDeleteSet:
		if _, ok := t.Sets[op.Name]; !ok {
			return nil, fmt.Errorf("delete set %s: no such set", op.Name)
		}
		if by := setUsers(t, op.Name); by != "" {
			return nil, fmt.Errorf("delete set %s: still referenced by %s", op.Name, by)
		}
		delete(t.Sets, op.Name)
	case OpAddElements:
		s, ok := t.Sets[op.Name]
		if !ok {
			return nil, fmt.Errorf("add element to %s: no such set", op.Name)
		}
		for _, e := range op.Elements {
			if err := checkElement(t, s, e); err != nil {
				return nil, fmt.Errorf("add element to %s: %w", op.Name, err)
			}
			k := KeyString(t.Family, s.Key, e.Key)
			if old, ok := s.Elements[k]; ok && !sameVerdict(old.Verdict, e.Verdict) {
				return nil, fmt.Errorf("add element %s to %s: exists with another verdict", k, op.Name)
			}
			s.Elements[k] = e
		}
	case OpDeleteElements:
		s, ok := t.Sets[op.Name]
		if !ok {
			return nil, fmt.Errorf("delete element from %s: no such set", op.Name)
		}
		for _, e := range op.Elements {
			k := KeyString(t.Family, s.Key, e.Key)
			if _, ok := s.Elements[k]; !ok {
				return nil, fmt.Errorf("delete element %s from %s: no such element", k, op.Name)
			}
			delete(s.Elements, k)
		}
	default:
		return nil, fmt.Errorf("unknown op %d", op.Kind)
	}
	return t, nil
}

func sameVerdict(a, b *Verdict) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func checkTarget(t *Table, v Verdict) error {
	if v.Kind != Jump && v.Kind != Goto {
		return nil
	}
	c, ok := t.Chains[v.Chain]
	if !ok {
		return fmt.Errorf("%s: no such chain", v)
	}
	if c.Hook != nil {
		return fmt.Errorf("%s: cannot jump to a base chain", v)
	}
	return nil
}

func checkRule(t *Table, r *Rule) error {
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case Verdict:
			if err := checkTarget(t, e); err != nil {
				return err
			}
		case Lookup:
			s, ok := t.Sets[e.Set]
			if !ok || s.Verdict || len(s.Key) != len(e.Fields) {
				return fmt.Errorf("lookup @%s: no such set of %d fields", e.Set, len(e.Fields))
			}
		case Update:
			s, ok := t.Sets[e.Set]
			if !ok || s.Verdict || s.Timeout == 0 || len(s.Key) != len(e.Fields) {
				return fmt.Errorf("update @%s: no such dynamic set", e.Set)
			}
		case VMap:
			s, ok := t.Sets[e.Map]
			if !ok || !s.Verdict || len(s.Key) != len(e.Fields) {
				return fmt.Errorf("vmap @%s: no such verdict map of %d fields", e.Map, len(e.Fields))
			}
		}
	}
	return nil
}

func checkElement(t *Table, s *Set, e Element) error {
	if len(e.Key) != len(s.Key) {
		return fmt.Errorf("key of %d values for a set of %d fields", len(e.Key), len(s.Key))
	}
	for i, f := range s.Key {
		if (f == FieldSaddr || f == FieldDaddr) && (!e.Key[i].Addr.IsValid() || (e.Key[i].Addr.Is4() != (t.Family == ipfamily.IPv4))) {
			return fmt.Errorf("key value %d: not an address of family %s", i, t.Family)
		}
	}
	if s.Verdict != (e.Verdict != nil) {
		return fmt.Errorf("verdict given for a set, or missing for a map")
	}
	if e.Verdict != nil {
		return checkTarget(t, *e.Verdict)
	}
	return nil
}

// chainUsers names a rule or element that jumps to chain n, or returns "".
// The first of them in name order: a scan in map order finds whether there
// is one (no sort on the common path, where a deleted chain is unused), and
// only then a sorted scan names it.
func chainUsers(t *Table, n string) string {
	if chainUser(t, n, mapKeys(t.Chains), mapKeys(t.Sets)) == "" {
		return ""
	}
	return chainUser(t, n, t.ChainNames(), t.SetNames())
}

func chainUser(t *Table, n string, chains, sets []string) string {
	for _, cn := range chains {
		for _, r := range t.Chains[cn].Rules {
			for _, e := range r.Exprs {
				if v, ok := e.(Verdict); ok && (v.Kind == Jump || v.Kind == Goto) && v.Chain == n {
					return "a rule of chain " + cn
				}
			}
		}
	}
	for _, sn := range sets {
		for k, e := range t.Sets[sn].Elements {
			if e.Verdict != nil && e.Verdict.Chain == n {
				return "element " + k + " of map " + sn
			}
		}
	}
	return ""
}

// mapKeys returns m's keys in map order.
func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// setUsers names a rule that uses set n, or returns "": the first in chain
// name order, found as chainUsers finds one.
func setUsers(t *Table, n string) string {
	if setUser(t, n, mapKeys(t.Chains)) == "" {
		return ""
	}
	return setUser(t, n, t.ChainNames())
}

func setUser(t *Table, n string, chains []string) string {
	for _, cn := range chains {
		for _, r := range t.Chains[cn].Rules {
			for _, e := range r.Exprs {
				switch e := e.(type) {
				case Lookup:
					if e.Set == n {
						return "a rule of chain " + cn
					}
				case VMap:
					if e.Map == n {
						return "a rule of chain " + cn
					}
				case Update:
					if e.Set == n {
						return "a rule of chain " + cn
					}
				}
			}
		}
	}
	return ""
}
