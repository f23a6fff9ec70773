package difftest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Known is one entry of differences.md: a difference between svcnet and CoreDNS
// that is accepted, with the specification text that justifies svcnet's answer.
//
// An entry is a level-2 heading (its title) followed by these list items, in
// any order, then free text:
//
//   - "query: `REGEXP`", one or more: each matched against the whole Query.Key,
//     e.g. "web.alpha.svc.cluster.local. A";
//   - "fields: F, ...": the fields that may differ (AllFields);
//   - "rcode: C>S, ...", optional: the entry only covers these CoreDNS>svcnet
//     rcode pairs, e.g. NXDOMAIN>REFUSED;
//   - "spec: TEXT", required: the section that justifies svcnet's answer.
type Known struct {
	Title   string
	Line    int
	Queries []*regexp.Regexp
	Fields  []string
	// Rcodes, when set, limits the entry to these "COREDNS>SVCNET" pairs.
	Rcodes []string
	Spec   string
}

// Covers reports whether the entry accepts r's difference: a query pattern
// matches, every differing field is listed, and the rcodes are a listed pair
// (when the entry lists any).
func (k Known) Covers(r Result) bool {
	if !k.Matches(r.Query) {
		return false
	}
	for _, f := range r.Fields {
		if !slices.Contains(k.Fields, f) {
			return false
		}
	}
	return len(k.Rcodes) == 0 || slices.Contains(k.Rcodes, r.CoreDNS.Rcode+">"+r.Svcnet.Rcode)
}

// Matches reports whether one of the entry's query patterns matches q.
func (k Known) Matches(q Query) bool {
	key := q.Key()
	for _, re := range k.Queries {
		if re.MatchString(key) {
			return true
		}
	}
	return false
}

// ParseKnown reads the entries of differences.md (text). Text before the first
// level-2 heading is the file's introduction. An entry without a query, a
// field or a spec, an unknown field or rcode, a bad pattern or a repeated
// title is an error naming its line.
func ParseKnown(text string) ([]Known, error) {
	var out []Known
	var cur *Known
	finish := func() error {
		if cur == nil {
			return nil
		}
		switch {
		case len(cur.Queries) == 0:
			return fmt.Errorf("differences.md:%d %q: no `- query:` line", cur.Line, cur.Title)
		case len(cur.Fields) == 0:
			return fmt.Errorf("differences.md:%d %q: no `- fields:` line", cur.Line, cur.Title)
		case cur.Spec == "":
			return fmt.Errorf("differences.md:%d %q: no `- spec:` line", cur.Line, cur.Title)
		case slices.ContainsFunc(out, func(k Known) bool { return k.Title == cur.Title }):
			return fmt.Errorf("differences.md:%d: title %q used twice", cur.Line, cur.Title)
		}
		out = append(out, *cur)
		return nil
	}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if title, ok := strings.CutPrefix(line, "## "); ok {
			if err := finish(); err != nil {
				return nil, err
			}
			cur = &Known{Title: strings.TrimSpace(title), Line: n}
			continue
		}
		if cur == nil {
			continue
		}
		key, val, ok := listItem(line)
		if !ok {
			continue
		}
		switch key {
		case "query":
			p := strings.Trim(val, "`")
			if p == "" || p == val {
				return nil, fmt.Errorf("differences.md:%d: query pattern must be in backquotes: %q", n, val)
			}
			re, err := regexp.Compile("^(?:" + p + ")$")
			if err != nil {
				return nil, fmt.Errorf("differences.md:%d: query pattern: %w", n, err)
			}
			cur.Queries = append(cur.Queries, re)
		case "fields":
			for _, f := range strings.Split(val, ",") {
				f = strings.TrimSpace(f)
				if !slices.Contains(AllFields, f) {
					return nil, fmt.Errorf("differences.md:%d: unknown field %q (want some of %s)", n, f, strings.Join(AllFields, ", "))
				}
				cur.Fields = append(cur.Fields, f)
			}
		case "rcode":
			for _, p := range strings.Split(val, ",") {
				p = strings.TrimSpace(p)
				a, b, ok := strings.Cut(p, ">")
				if !ok || !isRcode(a) || !isRcode(b) {
					return nil, fmt.Errorf("differences.md:%d: rcode pair %q: want COREDNS>SVCNET, e.g. NXDOMAIN>REFUSED", n, p)
				}
				cur.Rcodes = append(cur.Rcodes, p)
			}
		case "spec":
			cur.Spec = val
		}
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

func isRcode(s string) bool {
	_, ok := dns.StringToRcode[s]
	return ok
}

// listItem splits "- key: value" into key and value.
func listItem(line string) (key, val string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "- ")
	if !ok {
		return "", "", false
	}
	key, val, ok = strings.Cut(rest, ":")
	if !ok {
		return "", "", false
	}
	return strings.TrimSpace(key), strings.TrimSpace(val), true
}

// Result is one query's outcome: each server's canonical response and the
// fields in which they differ (empty: equal).
type Result struct {
	Query           Query
	CoreDNS, Svcnet Canon
	Fields          []string
}

// Verdict classifies a run's results against the known differences.
type Verdict struct {
	Queries, Equal int
	// Known counts, per entry title, the differing queries it covered.
	Known map[string]int
	// Unlisted are the differences no entry covers.
	Unlisted []Result
	// Stale are the entries that covered no difference in this run.
	Stale []Known
}

// KnownTotal is the number of differing queries some entry covered.
func (v Verdict) KnownTotal() int {
	n := 0
	for _, c := range v.Known {
		n += c
	}
	return n
}

// Classify sorts results into equal, known (counted for the first entry that
// covers the difference) and unlisted, and finds the stale entries: those that
// cover no difference at all (an entry that only ever overlaps an earlier one
// is not stale).
func Classify(results []Result, known []Known) Verdict {
	v := Verdict{Queries: len(results), Known: map[string]int{}}
	used := make([]bool, len(known))
	for _, r := range results {
		if len(r.Fields) == 0 {
			v.Equal++
			continue
		}
		first := -1
		for i, k := range known {
			if k.Covers(r) {
				used[i] = true
				if first < 0 {
					first = i
				}
			}
		}
		if first < 0 {
			v.Unlisted = append(v.Unlisted, r)
			continue
		}
		v.Known[known[first].Title]++
	}
	for i, k := range known {
		if !used[i] {
			v.Stale = append(v.Stale, k)
		}
	}
	return v
}

// Describe is a report of one differing result: the query, then each differing
// field as CoreDNS and svcnet answered it.
func (r Result) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  (key %q) differs in %s", r.Query, r.Query.Key(), strings.Join(r.Fields, ", "))
	for _, f := range r.Fields {
		fmt.Fprintf(&b, "\n\t%s:\n\t  coredns: %s\n\t  svcnet:  %s", f, r.CoreDNS.Field(f), r.Svcnet.Field(f))
	}
	return b.String()
}
