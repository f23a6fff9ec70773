package nftrace

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft"
)

// TestRuleHandles reads the handles of svcTable and checks them, chain by
// chain and in order, against `nft -a list`; the other family's table of the
// same name and a missing table are errors.
func TestRuleHandles(t *testing.T) {
	ns := netnstest.New(t, "trhandles")
	nftLoad(t, ns, svcTable)
	// A table of another name must not leak into the answer.
	nftLoad(t, ns, "table ip noise { chain services { counter; counter; }; }")
	got, err := RuleHandles(ns, ipfamily.IPv4, "svc")
	if err != nil {
		t.Fatal(err)
	}
	want := Handles{}
	chain := ""
	handle := regexp.MustCompile(`# handle (\d+)$`)
	for _, line := range strings.Split(run(t, ns, "nft", "-a", "list", "table", "ip", "svc"), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "chain ") {
			chain = strings.Fields(line)[1]
			continue
		}
		if strings.HasPrefix(line, "map ") || line == "}" {
			chain = ""
		}
		if m := handle.FindStringSubmatch(line); m != nil && chain != "" {
			h, _ := strconv.ParseUint(m[1], 10, 64)
			want[chain] = append(want[chain], h)
		}
	}
	if len(want["filter-input"]) != 4 {
		t.Fatalf("nft -a listing not understood: %v", want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handles (-nft +RuleHandles):\n%s", diff)
	}
	for i, h := range got["filter-input"] {
		if got.Index("filter-input", h) != i {
			t.Errorf("Index(filter-input, %d) = %d, want %d", h, got.Index("filter-input", h), i)
		}
	}
	if got.Index("filter-input", 0) != -1 || got.Index("checks", got["filter-input"][0]) != -1 {
		t.Error("Index of handle 0, or of another chain's rule, is not -1")
	}

	for _, c := range []struct {
		f     ipfamily.Family
		table string
	}{{ipfamily.IPv6, "svc"}, {ipfamily.IPv4, "absent"}} {
		if _, err := RuleHandles(ns, c.f, c.table); err == nil || !strings.Contains(err.Error(), "no such table") {
			t.Errorf("RuleHandles(%s %s): %v, want no such table", c.f, c.table, err)
		}
	}
}

// TestHandlesOf: handles by chain in rule order; rules without a handle
// (the policy marker of a read-back base chain) and chains without rules
// are left out.
func TestHandlesOf(t *testing.T) {
	tbl := nft.NewTable(ipfamily.IPv4, "svc")
	tbl.Chains["input"] = &nft.Chain{Name: "input", Hook: &nft.Hook{Type: "filter", Hook: "input"}, Rules: []*nft.Rule{
		{Exprs: []nft.Expr{nft.Counter{}}, Handle: 3},
		{Exprs: []nft.Expr{nft.Verdict{Kind: nft.Accept}}, Handle: 5},
		{Comment: "<unrecognised: policy drop>"},
	}}
	tbl.Chains["empty"] = &nft.Chain{Name: "empty"}
	if d := cmp.Diff(Handles{"input": {3, 5}}, HandlesOf(tbl)); d != "" {
		t.Errorf("HandlesOf (-want +got):\n%s", d)
	}
}
