package iptables

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Fake is a state-tracking Runner: it applies restore input with
// iptables-restore --noflush semantics (see the package doc), committing
// each table atomically, and refuses what the kernel refuses: rules of
// missing chains, jumps to missing chains, deleting a builtin, non-empty or
// referenced chain, deleting a rule that is not there, a rule number out of
// range in "-I chain N" or "-D chain N". Rule specs are kept
// verbatim (iptables-save would print them in its canonical order).
type Fake struct {
	mu     sync.Mutex
	tables map[ipfamily.Family]map[string]*Table
	// Restores counts successful Restore calls.
	Restores int
	// Refuse, when set, is asked about every rule spec a restore adds; an
	// error refuses it as the kernel refuses an extension it lacks.
	Refuse func(spec string) error
}

var _ Runner = (*Fake)(nil)

// NewFake returns a fake with no tables.
func NewFake() *Fake { return &Fake{tables: map[ipfamily.Family]map[string]*Table{}} }

// targets are the non-chain targets svcnet and kube-proxy use.
var targets = []string{"ACCEPT", "DROP", "RETURN", "REJECT", "DNAT", "SNAT", "MASQUERADE", "MARK", "REDIRECT", "LOG", "CONNMARK"}

// Restore implements Runner.
func (k *Fake) Restore(_ context.Context, f ipfamily.Family, input []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tables[f] == nil {
		k.tables[f] = map[string]*Table{}
	}
	var cur *Table
	sc := bufio.NewScanner(bytes.NewReader(input))
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			if cur != nil {
				return fmt.Errorf("line %d: table %s has no COMMIT", ln, cur.Name)
			}
			name := line[1:]
			if old := k.tables[f][name]; old != nil {
				cur = old.Clone()
			} else if cur = NewTable(name); cur == nil {
				return fmt.Errorf("line %d: unknown table %q", ln, name)
			}
		case cur == nil:
			return fmt.Errorf("line %d: %q outside a table", ln, line)
		case line == "COMMIT":
			k.tables[f][cur.Name] = cur
			cur = nil
		default:
			if k.Refuse != nil && (strings.HasPrefix(line, "-A ") || strings.HasPrefix(line, "-I ")) {
				if _, spec, _ := strings.Cut(line[3:], " "); k.Refuse(spec) != nil {
					return fmt.Errorf("line %d: %w", ln, k.Refuse(spec))
				}
			}
			if err := apply(cur, line); err != nil {
				return fmt.Errorf("line %d: %w", ln, err)
			}
		}
	}
	if cur != nil {
		return fmt.Errorf("table %s: no COMMIT", cur.Name)
	}
	k.Restores++
	return sc.Err()
}

// apply applies one restore line to t.
func apply(t *Table, line string) error {
	if strings.HasPrefix(line, ":") {
		f := strings.Fields(line[1:])
		if len(f) < 2 {
			return fmt.Errorf("bad chain line %q", line)
		}
		if c := t.Chains[f[0]]; c != nil {
			if IsBuiltin(t.Name, f[0]) {
				c.Policy = f[1]
			} else {
				c.Rules = nil
			}
			return nil
		}
		if IsBuiltin(t.Name, f[0]) || f[1] != "-" {
			return fmt.Errorf("chain %s: a user chain's policy is \"-\"", f[0])
		}
		t.Chains[f[0]] = &Chain{Name: f[0], Policy: "-"}
		return nil
	}
	op, rest, _ := strings.Cut(line, " ")
	name, spec, _ := strings.Cut(rest, " ")
	c := t.Chains[name]
	if c == nil {
		return fmt.Errorf("%s %s: no chain/target/match by that name", op, name)
	}
	switch op {
	case "-A", "-I":
		at := 1
		if op == "-I" {
			if num, rest, ok := ruleNum(spec); ok {
				if num < 1 || num > len(c.Rules)+1 {
					return fmt.Errorf("-I %s %d: Index of insertion too big", name, num)
				}
				at, spec = num, rest
			}
		}
		if err := checkTarget(t, spec); err != nil {
			return err
		}
		if op == "-A" {
			c.Rules = append(c.Rules, spec)
		} else {
			c.Rules = slices.Insert(c.Rules, at-1, spec)
		}
	case "-D":
		if num, rest, ok := ruleNum(spec); ok && rest == "" {
			if num < 1 || num > len(c.Rules) {
				return fmt.Errorf("-D %s %d: Index of deletion too big", name, num)
			}
			c.Rules = slices.Delete(c.Rules, num-1, num)
			return nil
		}
		i := slices.Index(c.Rules, spec)
		if i < 0 {
			return fmt.Errorf("-D %s: bad rule (does a matching rule exist in that chain?)", name)
		}
		c.Rules = slices.Delete(c.Rules, i, i+1)
	case "-F":
		c.Rules = nil
	case "-X":
		if IsBuiltin(t.Name, name) {
			return fmt.Errorf("-X %s: cannot delete a builtin chain", name)
		}
		if len(c.Rules) > 0 {
			return fmt.Errorf("-X %s: directory not empty", name)
		}
		if by := referrer(t, name); by != "" {
			return fmt.Errorf("-X %s: too many links (referenced by %s)", name, by)
		}
		delete(t.Chains, name)
	default:
		return fmt.Errorf("unsupported command %q", op)
	}
	return nil
}

// ruleNum splits a rule number off the front of spec, as iptables reads
// "-I chain [rulenum] rule" and "-D chain rulenum".
func ruleNum(spec string) (int, string, bool) {
	word, rest, _ := strings.Cut(spec, " ")
	n, err := strconv.Atoi(word)
	if err != nil || word == "" || word[0] < '0' || word[0] > '9' {
		return 0, spec, false
	}
	return n, rest, true
}

// JumpTarget returns the -j or -g target of a rule spec ("" if none).
func JumpTarget(spec string) string {
	f := strings.Fields(spec)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" || f[i] == "--jump" || f[i] == "--goto" {
			return f[i+1]
		}
	}
	return ""
}

func checkTarget(t *Table, spec string) error {
	j := JumpTarget(spec)
	if j == "" || slices.Contains(targets, j) {
		return nil
	}
	if t.Chains[j] == nil || IsBuiltin(t.Name, j) {
		return fmt.Errorf("rule %q: couldn't load target `%s'", spec, j)
	}
	return nil
}

// referrer names a rule that jumps to chain n, or "".
func referrer(t *Table, n string) string {
	for _, cn := range t.ChainNames() {
		for _, r := range t.Chains[cn].Rules {
			if JumpTarget(r) == n {
				return cn
			}
		}
	}
	return ""
}

// Save implements Runner. A table never restored is returned with its empty
// builtin chains, as iptables-save prints it.
func (k *Fake) Save(_ context.Context, f ipfamily.Family, table string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t := k.tables[f][table]; t != nil {
		return t.Save(), nil
	}
	t := NewTable(table)
	if t == nil {
		return nil, fmt.Errorf("iptables-save -t %s: table does not exist", table)
	}
	return t.Save(), nil
}
