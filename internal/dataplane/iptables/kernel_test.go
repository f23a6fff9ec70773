package iptables

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// kernel is the iptables boundary in ns: iptables-nft, this host's default.
func kernel(ns *netns.NS) *ipt.Exec { return &ipt.Exec{Variant: ipt.NFT, Command: ns.CommandContext} }

// restoreIn restores input with --noflush in ns.
func restoreIn(t *testing.T, ns *netns.NS, f ipfamily.Family, input string) {
	t.Helper()
	if err := kernel(ns).Restore(context.Background(), f, []byte(input)); err != nil {
		t.Fatal(err)
	}
}

// testIn asks the family's iptables-restore --test whether it accepts input.
func testIn(t *testing.T, ns *netns.NS, f ipfamily.Family, input string) {
	t.Helper()
	restore := "iptables-nft-restore"
	if f == ipfamily.IPv6 {
		restore = "ip6tables-nft-restore"
	}
	cmd := ns.Command(restore, "--noflush", "--test")
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s --test: %v\n%s", restore, err, out)
	}
}

// savedChains returns the chains of table in ns as iptables-save lists
// them, without the built-in ones, and the number of rules.
func savedChains(t *testing.T, ns *netns.NS, f ipfamily.Family, table string) (chains []string, rules int) {
	t.Helper()
	out, err := kernel(ns).Save(context.Background(), f, table)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := ipt.ParseSave(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range tables[table].ChainNames() {
		if !ipt.IsBuiltin(table, n) {
			chains = append(chains, n)
		}
		rules += len(tables[table].Chains[n].Rules)
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
				testIn(t, ns, fam, Render(featureTable(t, n), fam).Full())
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

// TestKernelReadsBackRendered: what the plane renders is what iptables-save
// prints back, rule for rule and in order, for every feature row and
// detect-local mode, both families and both iptables variants; so a
// restarted proxy recognises its own chains, a drift check compares text,
// and a user reads in iptables-save exactly the rendered rules.
func TestKernelReadsBackRendered(t *testing.T) {
	for _, v := range []ipt.Variant{ipt.NFT, ipt.Legacy} {
		for _, fam := range ipfamily.All {
			for _, m := range detectModes {
				t.Run(fmt.Sprintf("%s/%s/%s", v, fam, m.name), func(t *testing.T) {
					ns := netnstest.New(t, "iptables-rb")
					run := &ipt.Exec{Variant: v, Command: ns.CommandContext}
					n := testNode()
					m.edit(&n)
					rs := Render(featureTable(t, n), fam)
					if err := run.Restore(context.Background(), fam, []byte(rs.Full())); err != nil {
						t.Fatal(err)
					}
					for _, table := range []string{TableFilter, TableNAT} {
						out, err := run.Save(context.Background(), fam, table)
						if err != nil {
							t.Fatal(err)
						}
						saved, err := ipt.ParseSave(out)
						if err != nil {
							t.Fatal(err)
						}
						for name, c := range rs.Chains(table) {
							k := saved[table].Chains[name]
							if k == nil {
								t.Errorf("%s %s: not in the kernel", table, name)
								continue
							}
							if !slices.Equal(k.Rules, c.Rules) {
								t.Errorf("%s %s: iptables-save prints\n  %s\nrendered\n  %s", table, name,
									strings.Join(k.Rules, "\n  "), strings.Join(c.Rules, "\n  "))
							}
						}
					}
				})
			}
		}
	}
}
