package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Outcome is what one spec did on one side.
type Outcome string

// The outcomes a spec can have. NotRun is a spec absent from a side's report.
const (
	Passed  Outcome = "passed"
	Failed  Outcome = "failed"
	Skipped Outcome = "skipped"
	NotRun  Outcome = "not run"
)

// parseOutcome maps a ginkgo spec state to an Outcome.
func parseOutcome(state string) (Outcome, error) {
	switch state {
	case "passed":
		return Passed, nil
	case "skipped", "pending":
		return Skipped, nil
	case "failed", "aborted", "panicked", "interrupted", "timedout":
		return Failed, nil
	case "not run":
		return NotRun, nil
	}
	return "", fmt.Errorf("unknown spec state %q", state)
}

// Result is one spec's outcome on one side.
type Result struct {
	// Spec is the full spec text as ginkgo prints it: the container texts and
	// the leaf's, joined by spaces ("[sig-network] Services should serve a
	// basic endpoint from pods [Conformance]").
	Spec    string
	Outcome Outcome
	// Message is the first line of the failure or skip message.
	Message string
}

// ginkgoReport is the part of ginkgo v2's JSON report (--json-report) read
// here: one element per suite.
type ginkgoReport []struct {
	SpecReports []struct {
		ContainerHierarchyTexts []string
		LeafNodeText            string
		LeafNodeType            string
		State                   string
		Failure                 struct {
			Message string
		}
	}
}

// ParseReport reads a ginkgo JSON report and returns the results of its It
// specs (suite set-up nodes are not specs). name names the report in errors.
func ParseReport(r io.Reader, name string) ([]Result, error) {
	var rep ginkgoReport
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("ginkgo report %s: %w", name, err)
	}
	var out []Result
	for _, suite := range rep {
		for _, s := range suite.SpecReports {
			if s.LeafNodeType != "It" {
				continue
			}
			o, err := parseOutcome(s.State)
			if err != nil {
				return nil, fmt.Errorf("ginkgo report %s: spec %q: %w", name, s.LeafNodeText, err)
			}
			texts := append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText)
			msg, _, _ := strings.Cut(strings.TrimSpace(s.Failure.Message), "\n")
			out = append(out, Result{Spec: strings.Join(nonEmpty(texts), " "), Outcome: o, Message: msg})
		}
	}
	return out, nil
}

func nonEmpty(ss []string) []string {
	out := ss[:0]
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
