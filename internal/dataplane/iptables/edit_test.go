package iptables

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// applyEdits restores chain with rules old into the fake, applies lines,
// and returns the chain's rules read back.
func applyEdits(t *testing.T, old []string, lines []string) []string {
	t.Helper()
	ctx := context.Background()
	k := ipt.NewFake()
	var b strings.Builder
	writeTable(&b, TableNAT, []*Chain{{Name: "X", Rules: old}}, nil)
	if err := k.Restore(ctx, ipfamily.IPv4, []byte(b.String())); err != nil {
		t.Fatal(err)
	}
	in := "*nat\n" + strings.Join(lines, "\n") + "\nCOMMIT\n"
	if err := k.Restore(ctx, ipfamily.IPv4, []byte(in)); err != nil {
		t.Fatalf("%v\n%s", err, in)
	}
	return natTable(t, k, ipfamily.IPv4, TableNAT).Chains["X"].Rules
}

func rulesNamed(names ...int) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("-m comment --comment r%d -j RETURN", n)
	}
	return out
}

// TestEditLinesShortest: one rule added, removed or replaced in a long
// chain is one or two lines naming its position.
func TestEditLinesShortest(t *testing.T) {
	var base []int
	for i := range 1000 {
		base = append(base, i)
	}
	old := rulesNamed(base...)
	for _, tc := range []struct {
		name string
		new  []string
		want []string
	}{
		{"insert", rulesNamed(slices.Insert(slices.Clone(base), 500, 5000)...), []string{"-I X 501 " + rulesNamed(5000)[0]}},
		{"append", rulesNamed(append(slices.Clone(base), 5000)...), []string{"-A X " + rulesNamed(5000)[0]}},
		{"prepend", rulesNamed(append([]int{5000}, base...)...), []string{"-I X 1 " + rulesNamed(5000)[0]}},
		{"delete", rulesNamed(slices.Delete(slices.Clone(base), 10, 11)...), []string{"-D X 11"}},
		{"delete last", rulesNamed(base[:999]...), []string{"-D X 1000"}},
		{"replace", rulesNamed(slices.Replace(slices.Clone(base), 7, 8, 5000)...), []string{"-D X 8", "-I X 8 " + rulesNamed(5000)[0]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := editLines("X", old, tc.new)
			if !ok || !slices.Equal(got, tc.want) {
				t.Fatalf("editLines = %q, %v; want %q", got, ok, tc.want)
			}
			if back := applyEdits(t, old, got); !slices.Equal(back, tc.new) {
				t.Errorf("chain after the edit differs from the new rules")
			}
		})
	}
}

// TestEditLinesRandom: for random chains and random changes (with repeated
// rules), the edit applied to the old chain gives the new one, and it has
// no more lines than deleting the old rules not kept and inserting the
// new ones would.
func TestEditLinesRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		var a []int
		for range r.IntN(40) {
			a = append(a, r.IntN(30))
		}
		b := slices.Clone(a)
		for range r.IntN(8) {
			switch r.IntN(3) {
			case 0:
				b = slices.Insert(b, r.IntN(len(b)+1), r.IntN(30))
			case 1:
				if len(b) > 0 {
					j := r.IntN(len(b))
					b = slices.Delete(b, j, j+1)
				}
			default:
				if len(b) > 0 {
					b[r.IntN(len(b))] = r.IntN(30)
				}
			}
		}
		old, new := rulesNamed(a...), rulesNamed(b...)
		script, ok := diffRules(old, new, len(old)+len(new))
		if !ok {
			t.Fatalf("case %d: no script within n+m steps", i)
		}
		if d := editCount(script); d > len(old)+len(new)-2*lcsLen(old, new) {
			t.Fatalf("case %d: %d edits, more than the shortest %d", i, d, len(old)+len(new)-2*lcsLen(old, new))
		}
		lines, ok := editLines("X", old, new)
		if !ok {
			continue
		}
		if back := applyEdits(t, old, lines); !slices.Equal(back, new) {
			t.Fatalf("case %d: %v -> %v: edit gives %v", i, a, b, back)
		}
	}
}

func editCount(s []edit) int {
	n := 0
	for _, e := range s {
		if e.kind != keep {
			n++
		}
	}
	return n
}

// lcsLen is the length of a longest common subsequence, by dynamic
// programming: the reference for the shortest script's length.
func lcsLen(a, b []string) int {
	prev := make([]int, len(b)+1)
	for i := range a {
		cur := make([]int, len(b)+1)
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(cur[j], prev[j+1])
			}
		}
		prev = cur
	}
	return prev[len(b)]
}

// TestEditLinesBounded: a change of more than half the chain, or of more
// than maxEditRules rules, is left to a rewrite of the whole chain.
func TestEditLinesBounded(t *testing.T) {
	if _, ok := editLines("X", rulesNamed(1, 2, 3, 4), rulesNamed(5, 6, 7, 8)); ok {
		t.Error("a chain replaced whole was edited")
	}
	var a, b []int
	for i := range 4 * maxEditRules {
		a = append(a, i)
		b = append(b, i+1_000_000*(i%2))
	}
	if _, ok := editLines("X", rulesNamed(a...), rulesNamed(b...)); ok {
		t.Errorf("%d changed rules edited in place", 2*maxEditRules)
	}
}

// TestBackendEditsSharedChains: a partial sync that adds a Service inserts
// its KUBE-SERVICES rule in place (the chain is not declared, which would
// flush it), and one that deletes it deletes that rule by number before
// removing the Service's chains; after each the kernel holds what a full
// sync of the same table writes.
func TestBackendEditsSharedChains(t *testing.T) { editsSharedChains(t, ipt.NewFake()) }

// recorder keeps the last restore input that reaches its runner.
type recorder struct {
	ipt.Runner
	last string
}

func (r *recorder) Restore(ctx context.Context, f ipfamily.Family, input []byte) error {
	r.last = string(input)
	return r.Runner.Restore(ctx, f, input)
}

// editsSharedChains is TestBackendEditsSharedChains on run, a fake or the
// kernel.
func editsSharedChains(t *testing.T, run ipt.Runner) {
	ctx := context.Background()
	// svc-41 is a ClusterIP Service: one rule of its own in the shared
	// chains, in KUBE-SERVICES.
	base := manyServices(t, 41, 0)
	added := withService(t, base, 41)
	k := &recorder{Runner: run}
	b := New(k, ipfamily.IPv4)
	if _, err := b.Sync(ctx, base, false); err != nil {
		t.Fatal(err)
	}
	rs := Render(&added, ipfamily.IPv4)
	own := rs.portByID("default/svc-41:http/tcp").Chains
	if len(own) != 3 {
		t.Fatalf("svc-41 has %d chains, want KUBE-SVC and two KUBE-SEP", len(own))
	}
	lines := 0
	for _, c := range own {
		lines += 1 + len(c.Rules)
	}
	for _, step := range []struct {
		name string
		tbl  *servicetable.Table
		edit string
		ops  int
	}{
		// Its chains declared and filled, and the KUBE-SERVICES rule.
		{"add", &added, "-I " + ChainServices + " ", lines + 1},
		// Its chains declared (flushed) and removed, and the rule.
		{"delete", base, "-D " + ChainServices + " ", 2*len(own) + 1},
	} {
		st, err := b.Sync(ctx, step.tbl, false)
		if err != nil || st.Full {
			t.Fatalf("%s: sync = %+v, %v", step.name, st, err)
		}
		if !strings.Contains(k.last, "\n"+step.edit) || strings.Contains(k.last, ":"+ChainServices+" ") {
			t.Errorf("%s: KUBE-SERVICES not edited in place:\n%s", step.name, k.last)
		}
		if st.TotalOps() != step.ops {
			t.Errorf("%s: %d ops, want %d:\n%s", step.name, st.TotalOps(), step.ops, k.last)
		}
		ref := ipt.NewFake()
		if _, err := New(ref, ipfamily.IPv4).Sync(ctx, step.tbl, true); err != nil {
			t.Fatal(err)
		}
		if got, want := ownState(t, run, ipfamily.IPv4), ownState(t, ref, ipfamily.IPv4); got != want {
			t.Errorf("%s: kernel after the edit\n%s\nwant\n%s", step.name, got, want)
		}
	}
}
