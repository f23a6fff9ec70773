package conformance

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Side names, as the summary lines print them.
const (
	SideSvcnet   = "svcnet"
	SideUpstream = "kube-proxy+coredns"
)

// Row is one spec with its outcome on each side; Entry is the list entry
// that covers it (nil when it passes on both sides, or none does).
type Row struct {
	Spec     string
	Svcnet   Result
	Upstream Result
	Entry    *Entry
}

// Counts are a side's totals over the selected specs; a spec not run counts
// as failed, as it did not pass and was not skipped by the suite.
type Counts struct {
	Passed, Failed, Skipped int
}

func (c *Counts) add(o Outcome) {
	switch o {
	case Passed:
		c.Passed++
	case Skipped:
		c.Skipped++
	default:
		c.Failed++
	}
}

// Verdict is the comparison of two sides' results.
type Verdict struct {
	Rows             []Row
	Svcnet, Upstream Counts
	// Problems make the run fail: unlisted differences, stale entries,
	// specs svcnet fails where kube-proxy + CoreDNS pass, fewer passes.
	Problems []string
}

// Compare judges svcnet's results against upstream's and the known list.
// With upstream nil only svcnet ran (the `make test` pass over the
// [Conformance] specs, every one of which must pass): give known nil, so
// that any spec svcnet does not pass is a problem.
func Compare(svcnet, upstream []Result, known []Entry) Verdict {
	var v Verdict
	bySpec := map[string]*Row{}
	row := func(spec string) *Row {
		r := bySpec[spec]
		if r == nil {
			r = &Row{Spec: spec, Svcnet: Result{Spec: spec, Outcome: NotRun}, Upstream: Result{Spec: spec, Outcome: NotRun}}
			bySpec[spec] = r
		}
		return r
	}
	for _, r := range svcnet {
		row(r.Spec).Svcnet = r
	}
	for _, r := range upstream {
		row(r.Spec).Upstream = r
	}
	specs := make([]string, 0, len(bySpec))
	for s := range bySpec {
		specs = append(specs, s)
	}
	slices.Sort(specs)
	used := make([]bool, len(known))
	for _, s := range specs {
		r := bySpec[s]
		v.Svcnet.add(r.Svcnet.Outcome)
		if upstream != nil {
			v.Upstream.add(r.Upstream.Outcome)
		}
		both := r.Svcnet.Outcome == Passed && (upstream == nil || r.Upstream.Outcome == Passed)
		for i := range known {
			e := &known[i]
			if !e.Spec.MatchString(s) {
				continue
			}
			if both {
				v.Problems = append(v.Problems, fmt.Sprintf("stale entry %q (line %d): %q passes on both sides", e.Pattern, e.Line, s))
				used[i] = true
				continue
			}
			if e.Svcnet == r.Svcnet.Outcome && e.Upstream == r.Upstream.Outcome && r.Entry == nil {
				r.Entry, used[i] = e, true
			}
		}
		if both {
			v.Rows = append(v.Rows, *r)
			continue
		}
		if upstream != nil && r.Svcnet.Outcome != Passed && r.Upstream.Outcome == Passed {
			v.Problems = append(v.Problems, fmt.Sprintf("defect: %q: svcnet %s (%s), kube-proxy+coredns passed", s, r.Svcnet.Outcome, r.Svcnet.Message))
		} else if r.Entry == nil {
			v.Problems = append(v.Problems, fmt.Sprintf("unlisted: %q: svcnet %s (%s), kube-proxy+coredns %s (%s)",
				s, r.Svcnet.Outcome, r.Svcnet.Message, r.Upstream.Outcome, r.Upstream.Message))
		}
		v.Rows = append(v.Rows, *r)
	}
	for i, e := range known {
		if !used[i] {
			v.Problems = append(v.Problems, fmt.Sprintf("stale entry %q (line %d): no selected spec has svcnet %s, kube-proxy+coredns %s",
				e.Pattern, e.Line, e.Svcnet, e.Upstream))
		}
	}
	if upstream != nil && v.Svcnet.Passed < v.Upstream.Passed {
		v.Problems = append(v.Problems, fmt.Sprintf("svcnet passed %d specs, kube-proxy+coredns %d", v.Svcnet.Passed, v.Upstream.Passed))
	}
	return v
}

// Write prints one line per spec with both outcomes (and the listed cause's
// heading where a spec does not pass on both), then the problems, then one
// summary line per side (only svcnet's when upstream did not run).
func (v Verdict) Write(w io.Writer, upstreamRan bool) error {
	var b strings.Builder
	for _, r := range v.Rows {
		fmt.Fprintf(&b, "%-8s %-8s %s", r.Svcnet.Outcome, r.Upstream.Outcome, r.Spec)
		if r.Entry != nil {
			cause, _, _ := strings.Cut(r.Entry.Cause, "\n")
			fmt.Fprintf(&b, "  [known: %s]", cause)
		}
		b.WriteByte('\n')
	}
	for _, p := range v.Problems {
		fmt.Fprintf(&b, "PROBLEM: %s\n", p)
	}
	fmt.Fprintf(&b, "%s: %s\n", SideSvcnet, v.Svcnet)
	if upstreamRan {
		fmt.Fprintf(&b, "%s: %s\n", SideUpstream, v.Upstream)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (c Counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.Passed, c.Failed, c.Skipped)
}
