package difftest

import (
	"os"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

const sampleKnown = "# Known differences\n\nIntroduction, ignored.\n- query: `ignored`\n\n" +
	"## Outside names\n" +
	"- query: `example\\.com\\. .*`\n" +
	"- query: `local\\. A`\n" +
	"- fields: rcode, flags\n" +
	"- spec: RFC 1035 §4.1.1\n\nText.\n\n" +
	"## Pod AAAA\n" +
	"- query: `.*\\.pod\\.cluster\\.local\\. AAAA`\n" +
	"- fields: answer\n" +
	"- spec: §2.6\n"

func TestParseKnown(t *testing.T) {
	known, err := ParseKnown(sampleKnown)
	if err != nil {
		t.Fatal(err)
	}
	if len(known) != 2 || known[0].Title != "Outside names" || known[0].Line != 6 || len(known[0].Queries) != 2 ||
		strings.Join(known[0].Fields, ",") != "rcode,flags" || known[0].Spec != "RFC 1035 §4.1.1" {
		t.Fatalf("ParseKnown = %+v", known)
	}
	k := known[0]
	for _, c := range []struct {
		q      Query
		fields []string
		want   bool
	}{
		{Query{"EXAMPLE.com.", dns.TypeA}, []string{FieldRcode}, true},
		{Query{"example.com", dns.TypeMX}, []string{FieldRcode, FieldFlags}, true},
		{Query{"Local.", dns.TypeA}, []string{FieldFlags}, true},
		{Query{"local.", dns.TypeAAAA}, []string{FieldFlags}, false},                 // pattern is whole-key
		{Query{"www.example.com.", dns.TypeA}, []string{FieldRcode}, false},          // anchored at the start
		{Query{"example.com.", dns.TypeA}, []string{FieldRcode, FieldAnswer}, false}, // answer not listed
	} {
		if got := k.Covers(Result{Query: c.q, Fields: c.fields}); got != c.want {
			t.Errorf("Covers(%s, %v) = %v, want %v", c.q, c.fields, got, c.want)
		}
	}

	// An rcode constraint limits the entry to its pairs.
	limited, err := ParseKnown("## R\n- query: `x\\. A`\n- fields: rcode\n- rcode: NXDOMAIN>REFUSED, NOERROR>REFUSED\n- spec: §1\n")
	if err != nil {
		t.Fatal(err)
	}
	res := func(core, sv string) Result {
		return Result{Query: Query{"x.", dns.TypeA}, Fields: []string{FieldRcode}, CoreDNS: Canon{Rcode: core}, Svcnet: Canon{Rcode: sv}}
	}
	if !limited[0].Covers(res("NXDOMAIN", "REFUSED")) || !limited[0].Covers(res("NOERROR", "REFUSED")) || limited[0].Covers(res("NXDOMAIN", "NOERROR")) {
		t.Errorf("rcode pairs %v not applied", limited[0].Rcodes)
	}

	for name, bad := range map[string]string{
		"no query":      "## X\n- fields: rcode\n- spec: s\n",
		"no fields":     "## X\n- query: `a`\n- spec: s\n",
		"no spec":       "## X\n- query: `a`\n- fields: rcode\n",
		"unknown field": "## X\n- query: `a`\n- fields: rdata\n- spec: s\n",
		"bad regexp":    "## X\n- query: `(`\n- fields: rcode\n- spec: s\n",
		"no backquotes": "## X\n- query: a\n- fields: rcode\n- spec: s\n",
		"bad rcode":     "## X\n- query: `a`\n- fields: rcode\n- rcode: NXDOMAIN-REFUSED\n- spec: s\n",
		"unknown rcode": "## X\n- query: `a`\n- fields: rcode\n- rcode: NXDOMAIN>NOPE\n- spec: s\n",
		"same title":    "## X\n- query: `a`\n- fields: rcode\n- spec: s\n## X\n- query: `b`\n- fields: rcode\n- spec: s\n",
	} {
		if _, err := ParseKnown(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestClassify(t *testing.T) {
	known, err := ParseKnown(sampleKnown)
	if err != nil {
		t.Fatal(err)
	}
	results := []Result{
		{Query: Query{"web.alpha.svc.cluster.local.", dns.TypeA}},
		{Query: Query{"example.com.", dns.TypeA}, Fields: []string{FieldRcode}},
		{Query: Query{"example.com.", dns.TypeTXT}, Fields: []string{FieldRcode, FieldFlags}},
		{Query: Query{"web.alpha.svc.cluster.local.", dns.TypeSRV}, Fields: []string{FieldAnswer}},
	}
	v := Classify(results, known)
	if v.Queries != 4 || v.Equal != 1 || v.KnownTotal() != 2 || v.Known["Outside names"] != 2 {
		t.Errorf("Classify = %+v", v)
	}
	if len(v.Unlisted) != 1 || v.Unlisted[0].Query.Type != dns.TypeSRV {
		t.Errorf("unlisted = %+v", v.Unlisted)
	}
	if len(v.Stale) != 1 || v.Stale[0].Title != "Pod AAAA" {
		t.Errorf("stale = %+v", v.Stale)
	}
	if s := v.Summary(); !strings.HasPrefix(s, "4 queries, 1 equal, 2 known differences, 1 unlisted differences, 1 stale entries") {
		t.Errorf("Summary = %q", s)
	}
}

// TestDifferencesFile: the committed differences.md parses, and every entry
// names the specification.
func TestDifferencesFile(t *testing.T) {
	b, err := os.ReadFile("differences.md")
	if err != nil {
		t.Fatal(err)
	}
	known, err := ParseKnown(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range known {
		if !strings.Contains(k.Spec, "§") {
			t.Errorf("differences.md:%d %q: spec %q names no section (§)", k.Line, k.Title, k.Spec)
		}
	}
}
