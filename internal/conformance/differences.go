package conformance

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Entry is one known difference: the specs it covers (a regular expression
// matched against the whole spec text), the outcome each side has on them,
// and the cause, which is the entry's heading and text.
type Entry struct {
	Pattern  string
	Spec     *regexp.Regexp
	Svcnet   Outcome
	Upstream Outcome
	Cause    string
	// Line is where the entry's heading is, for errors.
	Line int
}

// The list's field names: one "- NAME: VALUE" line each under an entry's
// "## " heading.
const (
	fieldSpec     = "spec"
	fieldSvcnet   = "svcnet"
	fieldUpstream = "kube-proxy+coredns"
)

// ParseDifferences reads the list of known differences. It is Markdown: each
// entry is a "## cause" heading followed by "- spec: `REGEXP`", "- svcnet:
// OUTCOME" and "- kube-proxy+coredns: OUTCOME" lines (outcomes: passed,
// failed, skipped, not run) and free text saying why. Text before the first
// heading is the list's preamble. file names the list in errors.
func ParseDifferences(r io.Reader, file string) ([]Entry, error) {
	var (
		out  []Entry
		cur  *Entry
		seen map[string]bool
	)
	finish := func() error {
		if cur == nil {
			return nil
		}
		for _, f := range []string{fieldSpec, fieldSvcnet, fieldUpstream} {
			if !seen[f] {
				return fmt.Errorf("%s:%d: entry %q has no %q line", file, cur.Line, cur.Cause, f)
			}
		}
		cur.Cause = strings.TrimSpace(cur.Cause)
		out = append(out, *cur)
		return nil
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			if err := finish(); err != nil {
				return nil, err
			}
			cur, seen = &Entry{Cause: strings.TrimSpace(h) + "\n", Line: n}, map[string]bool{}
			continue
		}
		if cur == nil {
			continue
		}
		name, value, isField := strings.Cut(strings.TrimPrefix(line, "- "), ": ")
		if !strings.HasPrefix(line, "- ") || !isField || (name != fieldSpec && name != fieldSvcnet && name != fieldUpstream) {
			cur.Cause += line + "\n"
			continue
		}
		if seen[name] {
			return nil, fmt.Errorf("%s:%d: entry %q: second %q line", file, n, strings.TrimSpace(cur.Cause), name)
		}
		seen[name] = true
		value = strings.TrimSpace(value)
		switch name {
		case fieldSpec:
			expr := strings.Trim(value, "`")
			re, err := regexp.Compile("^(?:" + expr + ")$")
			if err != nil {
				return nil, fmt.Errorf("%s:%d: spec %q: %w", file, n, expr, err)
			}
			cur.Pattern, cur.Spec = expr, re
		case fieldSvcnet, fieldUpstream:
			o, err := parseOutcome(value)
			if err != nil || o == "" {
				return nil, fmt.Errorf("%s:%d: %s: %q is not an outcome (passed, failed, skipped, not run)", file, n, name, value)
			}
			if name == fieldSvcnet {
				cur.Svcnet = o
			} else {
				cur.Upstream = o
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}
