package conformance

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

const report = `[{"SpecReports":[
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeText":"should serve a basic endpoint from pods [Conformance]","LeafNodeType":"It","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeText":"should be able to up and down services","LeafNodeType":"It","State":"failed","Failure":{"Message":"timed out\nmore"}},
 {"ContainerHierarchyTexts":["[sig-network] Networking"],"LeafNodeText":"should do GCE things [Provider:GCE]","LeafNodeType":"It","State":"skipped"},
 {"ContainerHierarchyTexts":["[sig-storage] Volumes"],"LeafNodeText":"should mount","LeafNodeType":"It","State":"skipped"},
 {"ContainerHierarchyTexts":[],"LeafNodeText":"","LeafNodeType":"SynchronizedBeforeSuite","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeText":"should preserve source [Serial]","LeafNodeType":"It","State":"skipped"}
]}]`

const serialReport = `[{"SpecReports":[
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeText":"should preserve source [Serial]","LeafNodeType":"It","State":"timedout"}
]}]`

func parse(t *testing.T, s string) []Result {
	t.Helper()
	rs, err := ParseReport(strings.NewReader(s), "r.json")
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestParseAndMerge(t *testing.T) {
	rs := Merge(Network, parse(t, report), parse(t, serialReport))
	var got []string
	for _, r := range rs {
		got = append(got, string(r.Outcome)+"|"+r.Spec+"|"+r.Message)
	}
	want := []string{
		"failed|[sig-network] Services should be able to up and down services|timed out",
		"failed|[sig-network] Services should preserve source [Serial]|",
		"passed|[sig-network] Services should serve a basic endpoint from pods [Conformance]|",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("merged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(Merge(NetworkConformance, parse(t, report))); n != 1 {
		t.Errorf("conformance selection kept %d specs, want 1", n)
	}
}

func TestParseReportErrors(t *testing.T) {
	for _, bad := range []string{`{`, `[{"SpecReports":[{"LeafNodeType":"It","LeafNodeText":"x","State":"weird"}]}]`} {
		if _, err := ParseReport(strings.NewReader(bad), "bad.json"); err == nil || !strings.Contains(err.Error(), "bad.json") {
			t.Errorf("ParseReport(%q) = %v, want an error naming bad.json", bad, err)
		}
	}
}

const list = `# Known differences

Preamble.

## Needs a cloud load balancer
- spec: ` + "`" + `.*up and down.*` + "`" + `
- svcnet: failed
- kube-proxy+coredns: failed

Both fail: the spec needs X.
`

func entries(t *testing.T, s string) []Entry {
	t.Helper()
	es, err := ParseDifferences(strings.NewReader(s), "differences.md")
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestParseDifferences(t *testing.T) {
	es := entries(t, list)
	if len(es) != 1 || es[0].Svcnet != Failed || es[0].Upstream != Failed || es[0].Line != 5 ||
		!strings.HasPrefix(es[0].Cause, "Needs a cloud load balancer\n") || !strings.Contains(es[0].Cause, "the spec needs X") {
		t.Fatalf("entries %+v", es)
	}
	for _, bad := range []struct{ text, want string }{
		{"## a\n- spec: `x`\n- svcnet: failed\n", `no "kube-proxy+coredns" line`},
		{"## a\n- spec: `(`\n", "differences.md:2"},
		{"## a\n- spec: `x`\n- svcnet: broken\n", `"broken" is not an outcome`},
		{"## a\n- spec: `x`\n- spec: `y`\n", `second "spec" line`},
	} {
		if _, err := ParseDifferences(strings.NewReader(bad.text), "differences.md"); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseDifferences(%q) = %v, want an error containing %q", bad.text, err, bad.want)
		}
	}
}

func res(spec string, o Outcome) Result { return Result{Spec: spec, Outcome: o} }

func TestCompare(t *testing.T) {
	up := "[sig-network] Services should be able to up and down services"
	basic := "[sig-network] basic [Conformance]"
	other := "[sig-network] other"
	t.Run("listed-both-fail", func(t *testing.T) {
		v := Compare([]Result{res(basic, Passed), res(up, Failed)}, []Result{res(basic, Passed), res(up, Failed)}, entries(t, list))
		if len(v.Problems) != 0 {
			t.Errorf("problems %q", v.Problems)
		}
		var out bytes.Buffer
		if err := v.Write(&out, true); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		want := []string{
			"failed   failed   " + up + "  [known: Needs a cloud load balancer]",
			"passed   passed   [sig-network] basic [Conformance]",
			"svcnet: 1 passed, 1 failed, 0 skipped",
			"kube-proxy+coredns: 1 passed, 1 failed, 0 skipped",
		}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("output:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
		}
	})
	for _, tc := range []struct {
		name             string
		svcnet, upstream []Result
		want             []string
	}{
		{"unlisted", []Result{res(other, Skipped), res(up, Failed)}, []Result{res(other, Skipped), res(up, Failed)}, []string{"unlisted: \"[sig-network] other\""}},
		{"stale-passes", []Result{res(up, Passed)}, []Result{res(up, Passed)}, []string{"stale entry", "passes on both sides"}},
		{"stale-unmatched", []Result{res(basic, Passed)}, []Result{res(basic, Passed)}, []string{"stale entry", "no selected spec"}},
		{"defect-even-if-listed", []Result{res(up, Failed)}, []Result{res(up, Passed)}, []string{"defect:", "svcnet passed 0 specs, kube-proxy+coredns 1"}},
		{"outcomes-differ-from-entry", []Result{res(up, Skipped)}, []Result{res(up, Failed)}, []string{"unlisted:", "stale entry"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Compare(tc.svcnet, tc.upstream, entries(t, list))
			all := strings.Join(v.Problems, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems:\n%s\nwant one containing %q", all, w)
				}
			}
		})
	}
	t.Run("svcnet-only", func(t *testing.T) {
		v := Compare([]Result{res(basic, Passed), res(other, Failed)}, nil, nil)
		var out bytes.Buffer
		_ = v.Write(&out, false)
		if len(v.Problems) != 1 || !strings.Contains(out.String(), "svcnet: 1 passed, 1 failed, 0 skipped\n") || strings.Contains(out.String(), "kube-proxy+coredns:") {
			t.Errorf("problems %q, output:\n%s", v.Problems, out.String())
		}
	})
}

// TestCheckedInList: the node tier's list of known differences parses.
func TestCheckedInList(t *testing.T) {
	f, err := os.Open("../../test/node/conformance/differences.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	es, err := ParseDifferences(f, "test/node/conformance/differences.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.TrimSpace(e.Cause) == "" || !strings.Contains(e.Cause, "\n") {
			t.Errorf("entry %q (line %d): no cause given below its heading", e.Pattern, e.Line)
		}
	}
}
