package nft

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Keyword returns the nft family keyword of an IP family: "ip" or "ip6".
func Keyword(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return "ip6"
	}
	return "ip"
}

// addrType returns the nft datatype of an address of family f.
func addrType(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return "ipv6_addr"
	}
	return "ipv4_addr"
}

// Table is one nftables table with its chains and named sets.
type Table struct {
	Family ipfamily.Family
	Name   string
	Chains map[string]*Chain
	Sets   map[string]*Set
	// Handle is the kernel's handle of a table read back from it (0 for a
	// rendered one). Handles grow with creation, so they order tables by
	// when their base chains were registered (the simulator needs that for
	// base chains of equal priority).
	Handle uint64
}

// NewTable returns an empty table.
func NewTable(f ipfamily.Family, name string) *Table {
	return &Table{Family: f, Name: name, Chains: map[string]*Chain{}, Sets: map[string]*Set{}}
}

// ChainNames returns the chain names, sorted.
func (t *Table) ChainNames() []string { return sortedKeys(t.Chains) }

// SetNames returns the set and map names, sorted.
func (t *Table) SetNames() []string { return sortedKeys(t.Sets) }

// Clone returns a deep copy of the table (rules and elements are immutable
// values and are shared).
func (t *Table) Clone() *Table {
	c := NewTable(t.Family, t.Name)
	c.Handle = t.Handle
	for n, ch := range t.Chains {
		cc := *ch
		cc.Rules = slices.Clone(ch.Rules)
		c.Chains[n] = &cc
	}
	for n, s := range t.Sets {
		cs := *s
		cs.Elements = make(map[string]Element, len(s.Elements))
		for k, e := range s.Elements {
			cs.Elements[k] = e
		}
		c.Sets[n] = &cs
	}
	return c
}

// Hook makes a chain a base chain.
type Hook struct {
	Type     string // "nat" or "filter"
	Hook     string // "prerouting", "input", "forward", "output", "postrouting"
	Priority int
}

// Chain is a chain: a base chain when Hook is set, else a regular chain that
// rules jump or go to.
type Chain struct {
	Name  string
	Hook  *Hook
	Rules []*Rule
}

// Rule is a sequence of expressions evaluated left to right, and an optional
// comment (kept in the rule's user data in the kernel).
type Rule struct {
	Exprs   []Expr
	Comment string
	// Handle is the kernel's handle of a rule read back from it: unique in
	// its table and growing with creation (chains, sets and rules of a table
	// draw from one counter), so it names the rule in trace events. A rule
	// svcnet builds has handle 0, and nothing that renders or compares rules
	// looks at it: two rules that differ only in Handle are the same rule.
	Handle uint64
	// Source, when set, is the rule as written in the language it was
	// translated from (an iptables rule, "-A CHAIN SPEC"): what the
	// simulator shows for the rule instead of its nft rendering. Only
	// translated rules have one; the kernel never stores it.
	Source string
}

// R builds a rule from expressions.
func R(exprs ...Expr) *Rule { return &Rule{Exprs: exprs} }

// WithComment returns the rule with a comment.
func (r *Rule) WithComment(c string) *Rule { r.Comment = c; return r }

// Set is a named set, or a verdict map when Verdict is set. Its key is the
// concatenation of Key fields.
type Set struct {
	Name    string
	Comment string
	Key     []Field
	// Verdict makes the set a verdict map ("map NAME { type K : verdict }").
	Verdict bool
	// Timeout, when non-zero, makes the set dynamic with this default element
	// timeout (for `update @set { ip saddr }`: ClientIP affinity).
	Timeout time.Duration
	// Elements by Element.KeyString.
	Elements map[string]Element
}

// Element is one set element; Verdict is set for verdict maps.
type Element struct {
	Key     []Value
	Verdict *Verdict
}

// Value is one component of a set key or match: an address, or a number
// (protocol, port, mark). Which one is meaningful follows from the Field.
type Value struct {
	Addr netip.Addr
	Num  uint32
}

// A returns an address value.
func A(a netip.Addr) Value { return Value{Addr: a} }

// N returns a numeric value.
func N(n uint32) Value { return Value{Num: n} }

// Field is a packet or metadata field a rule or set key reads.
type Field uint8

const (
	FieldSaddr   Field = iota + 1 // ip saddr / ip6 saddr
	FieldDaddr                    // ip daddr / ip6 daddr
	FieldL4Proto                  // meta l4proto
	FieldDport                    // th dport
	FieldSport                    // th sport
)

// Protocol numbers used in rules.
const (
	ProtoTCP  = 6
	ProtoUDP  = 17
	ProtoSCTP = 132
)

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// KeyString renders the element's key in nft syntax for a table of family f
// and key fields; it identifies the element within its set.
func KeyString(f ipfamily.Family, key []Field, vals []Value) string {
	var b strings.Builder
	for i, v := range vals {
		if i > 0 {
			b.WriteString(" . ")
		}
		var fld Field
		if i < len(key) {
			fld = key[i]
		}
		b.WriteString(renderValue(fld, v))
	}
	return b.String()
}
