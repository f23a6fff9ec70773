package conformance

import (
	"regexp"
	"slices"
	"strings"
)

// Selection is which specs a run asks ginkgo for: Focus and Skip are the
// regular expressions passed as --focus and --skip (ginkgo matches them
// against the full spec text). ginkgo reports every spec of the binary,
// those filtered out as skipped, so results are judged only for the
// selected ones.
type Selection struct {
	Focus, Skip string
}

// Network is what the node tier's full run selects: every [sig-network] spec
// that is not [Disruptive], [Feature:…], [Flaky], written for one cloud
// provider, or for an [Alpha] feature gate (off by default). [Beta] gates are
// on by default, so their specs run. [Serial] specs run in a second pass, one
// at a time. With Kubernetes v1.36.3's e2e.test: 137 specs.
var Network = Selection{
	Focus: `\[sig-network\]`,
	Skip:  `\[Disruptive\]|\[Feature:[^\]]*\]|\[Flaky\]|\[Provider:[^\]]*\]|\[Alpha\]`,
}

// NetworkConformance is what `make test` selects: the [sig-network] specs
// that are [Conformance].
var NetworkConformance = Selection{
	Focus: `\[sig-network\].*\[Conformance\]`,
	Skip:  Network.Skip,
}

// Selected reports whether spec is one s selects.
func (s Selection) Selected(spec string) bool {
	return s.matcher()(spec)
}

// matcher compiles s once into a predicate.
func (s Selection) matcher() func(string) bool {
	focus, skip := compile(s.Focus), compile(s.Skip)
	return func(spec string) bool {
		return (focus == nil || focus.MatchString(spec)) && (skip == nil || !skip.MatchString(spec))
	}
}

// Serial reports whether spec must run alone ([Serial]).
func Serial(spec string) bool { return strings.Contains(spec, "[Serial]") }

// Merge returns the results of the specs s selects, from one or more reports
// of the same side (the parallel pass and the serial pass), one per spec,
// sorted by spec. A spec reported by several passes takes the outcome of the
// pass that ran it: any outcome other than Skipped wins over Skipped.
func Merge(s Selection, reports ...[]Result) []Result {
	selected := s.matcher()
	by := map[string]Result{}
	for _, rep := range reports {
		for _, r := range rep {
			if !selected(r.Spec) {
				continue
			}
			if old, ok := by[r.Spec]; ok && old.Outcome != Skipped {
				continue
			}
			by[r.Spec] = r
		}
	}
	out := make([]Result, 0, len(by))
	for _, r := range by {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Result) int { return strings.Compare(a.Spec, b.Spec) })
	return out
}

func compile(expr string) *regexp.Regexp {
	if expr == "" {
		return nil
	}
	return regexp.MustCompile(expr)
}
