package iptables

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Table is one iptables table as iptables-save prints it.
type Table struct {
	Name   string
	Chains map[string]*Chain
}

// Chain is one chain: Policy is "-" for a user chain, the builtin chain's
// policy otherwise; Rules are the rule specs after "-A NAME ".
type Chain struct {
	Name   string
	Policy string
	Rules  []string
}

// builtins are each table's builtin chains, in the order iptables-save
// prints them.
var builtins = map[string][]string{
	"filter":   {"INPUT", "FORWARD", "OUTPUT"},
	"nat":      {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle":   {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":      {"PREROUTING", "OUTPUT"},
	"security": {"INPUT", "FORWARD", "OUTPUT"},
}

// IsBuiltin reports whether chain is a builtin chain of table.
func IsBuiltin(table, chain string) bool { return slices.Contains(builtins[table], chain) }

// NewTable returns the table with its builtin chains, empty, policy ACCEPT.
// An unknown table name gives nil.
func NewTable(name string) *Table {
	b, ok := builtins[name]
	if !ok {
		return nil
	}
	t := &Table{Name: name, Chains: map[string]*Chain{}}
	for _, c := range b {
		t.Chains[c] = &Chain{Name: c, Policy: "ACCEPT"}
	}
	return t
}

// Clone returns a deep copy.
func (t *Table) Clone() *Table {
	out := &Table{Name: t.Name, Chains: make(map[string]*Chain, len(t.Chains))}
	for n, c := range t.Chains {
		out.Chains[n] = &Chain{Name: c.Name, Policy: c.Policy, Rules: slices.Clone(c.Rules)}
	}
	return out
}

// ChainNames returns the builtin chains in iptables-save's order, then the
// user chains sorted.
func (t *Table) ChainNames() []string {
	var out, user []string
	for _, b := range builtins[t.Name] {
		if t.Chains[b] != nil {
			out = append(out, b)
		}
	}
	for n := range t.Chains {
		if !IsBuiltin(t.Name, n) {
			user = append(user, n)
		}
	}
	slices.Sort(user)
	return append(out, user...)
}

// Save returns the table in iptables-save format (without the comment
// lines and counters iptables-save adds).
func (t *Table) Save() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%s\n", t.Name)
	names := t.ChainNames()
	for _, n := range names {
		fmt.Fprintf(&b, ":%s %s [0:0]\n", n, t.Chains[n].Policy)
	}
	for _, n := range names {
		for _, r := range t.Chains[n].Rules {
			fmt.Fprintf(&b, "-A %s %s\n", n, r)
		}
	}
	b.WriteString("COMMIT\n")
	return b.Bytes()
}

// ParseSave parses iptables-save output (one or more tables) into tables by
// name. Comment lines are skipped and counters dropped.
func ParseSave(text []byte) (map[string]*Table, error) {
	out := map[string]*Table{}
	var cur *Table
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			cur = &Table{Name: line[1:], Chains: map[string]*Chain{}}
			out[cur.Name] = cur
		case cur == nil:
			return nil, fmt.Errorf("line %d: %q outside a table", ln, line)
		case line == "COMMIT":
			cur = nil
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) < 2 {
				return nil, fmt.Errorf("line %d: bad chain line %q", ln, line)
			}
			cur.Chains[f[0]] = &Chain{Name: f[0], Policy: f[1]}
		case strings.HasPrefix(line, "-A "):
			name, spec, _ := strings.Cut(line[3:], " ")
			c := cur.Chains[name]
			if c == nil {
				return nil, fmt.Errorf("line %d: rule of undeclared chain %s", ln, name)
			}
			c.Rules = append(c.Rules, spec)
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", ln, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("table %s: no COMMIT", cur.Name)
	}
	return out, nil
}
