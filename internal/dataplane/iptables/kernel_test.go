package iptables

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// tools are the restore and save commands of a family (iptables-nft, this
// host's default).
func tools(f ipfamily.Family) (restore, save string) {
	if f == ipfamily.IPv6 {
		return "ip6tables-restore", "ip6tables-save"
	}
	return "iptables-restore", "iptables-save"
}

// restoreIn runs the family's iptables-restore --noflush (plus args) in ns
// with input.
func restoreIn(t *testing.T, ns *netns.NS, f ipfamily.Family, input string, args ...string) {
	t.Helper()
	restore, _ := tools(f)
	cmd := ns.Command(append([]string{restore, "--noflush"}, args...)...)
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", restore, args, err, out)
	}
}

// savedChains returns the chains of table in ns as iptables-save lists
// them, without the built-in ones, and the number of rules.
func savedChains(t *testing.T, ns *netns.NS, f ipfamily.Family, table string) (chains []string, rules int) {
	t.Helper()
	_, save := tools(f)
	out, err := ns.Command(save, "-t", table).Output()
	if err != nil {
		t.Fatalf("%s: %v", save, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, ":") && strings.Contains(line, " - "):
			chains = append(chains, strings.Fields(line[1:])[0])
		case strings.HasPrefix(line, "-A "):
			rules++
		}
	}
	slices.Sort(chains)
	return chains, rules
}

// jumpRestore is restore input prepending the Jumps to the built-in chains
// in order.
func jumpRestore() string {
	var b strings.Builder
	for _, table := range []string{TableFilter, TableNAT} {
		b.WriteString("*" + table + "\n")
		for _, j := range Jumps {
			if j.Table == table {
				fmt.Fprintf(&b, "-I %s %s\n", j.From, j.Rule)
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// TestKernelRestore feeds the rendered rulesets to the kernel through
// iptables-restore in a throwaway namespace: `--test` accepts the full
// restore of every feature row and detect-local mode in both families; the
// kernel takes it for real with the jumps from the built-in chains; a second
// full restore changes nothing; a partial restore after a change leaves
// exactly the new ruleset's chains.
func TestKernelRestore(t *testing.T) {
	ns := netnstest.New(t, "iptables")
	for _, fam := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			for _, m := range detectModes {
				n := testNode()
				m.edit(&n)
				restoreIn(t, ns, fam, Render(featureTable(t, n), fam).Full(), "--test")
			}
			rs := Render(featureTable(t, testNode()), fam)
			restoreIn(t, ns, fam, rs.Full())
			restoreIn(t, ns, fam, jumpRestore())
			for _, table := range []string{TableFilter, TableNAT} {
				var want []string
				for name := range rs.Chains(table) {
					want = append(want, name)
				}
				slices.Sort(want)
				got, rules := savedChains(t, ns, fam, table)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: the kernel has chains\n%v\nwant\n%v", table, got, want)
				}
				restoreIn(t, ns, fam, rs.Full())
				if _, again := savedChains(t, ns, fam, table); again != rules {
					t.Fatalf("%s: a second full restore went from %d to %d rules", table, rules, again)
				}
			}
		})
	}

	// A change through a partial restore, on top of the full one.
	ns = netnstest.New(t, "iptables-part")
	before, after := changeTables(t)
	old, cur := Render(before, ipfamily.IPv4), Render(after, ipfamily.IPv4)
	restoreIn(t, ns, ipfamily.IPv4, old.Full())
	restoreIn(t, ns, ipfamily.IPv4, cur.Partial(map[string]bool{"default/web:http/tcp": true, "default/gone:http/tcp": true}, cur.Stale(old)))
	var want []string
	for name := range cur.Chains(TableNAT) {
		want = append(want, name)
	}
	slices.Sort(want)
	got, rules := savedChains(t, ns, ipfamily.IPv4, TableNAT)
	if !slices.Equal(got, want) {
		t.Fatalf("after the partial restore the kernel has chains\n%v\nwant\n%v", got, want)
	}
	wantRules := 0
	for _, c := range cur.Chains(TableNAT) {
		wantRules += len(c.Rules)
	}
	if rules != wantRules {
		t.Fatalf("after the partial restore the kernel has %d nat rules, the ruleset %d", rules, wantRules)
	}
}
