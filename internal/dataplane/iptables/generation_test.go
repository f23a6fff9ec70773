package iptables

import (
	"context"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nft/netlink"
)

// TestGenerationWatch: Changed is false until a Sync, false right after
// one, true once the generation moves, false again after the next Sync;
// after Cleanup a moving generation is not reported.
func TestGenerationWatch(t *testing.T) {
	ctx := context.Background()
	var gen uint32 = 7
	w := WatchGeneration(New(ipt.NewFake()), func(context.Context) (uint32, error) { return gen, nil })
	changed := func(want bool, when string) {
		t.Helper()
		if got, err := w.Changed(ctx); err != nil || got != want {
			t.Fatalf("%s: Changed = %v, %v; want %v", when, got, err, want)
		}
	}
	gen++
	changed(false, "before the first Sync")
	tbl := featureTable(t, testNode())
	if _, err := w.Sync(ctx, tbl, false); err != nil {
		t.Fatal(err)
	}
	changed(false, "after a Sync")
	gen++
	changed(true, "after another commit")
	changed(true, "until the next Sync")
	if _, err := w.Sync(ctx, tbl, true); err != nil {
		t.Fatal(err)
	}
	changed(false, "after the repairing Sync")
	if err := w.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	gen++
	changed(false, "after Cleanup")
}

// TestKernelGenerationWatch runs the watched backend on iptables-nft in a
// throwaway namespace, with the namespace's real ruleset generation: a
// Sync is not reported as a change; KUBE-SERVICES flushed behind its back
// (the canary intact) is, at once; the full Sync that follows reports
// drift and restores the chain; another agent's nf_tables commit is
// reported too.
func TestKernelGenerationWatch(t *testing.T) {
	ns := netnstest.New(t, "iptgen")
	conn, err := netlink.New(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	k := kernel(ns)
	w := WatchGeneration(New(k), conn.Generation)
	tbl := featureTable(t, testNode())
	if _, err := w.Sync(ctx, tbl, false); err != nil {
		t.Fatal(err)
	}
	if moved, err := w.Changed(ctx); err != nil || moved {
		t.Fatalf("after its own Sync: Changed = %v, %v", moved, err)
	}
	if out, err := ns.Command("iptables-nft", "-t", "nat", "-F", ChainServices).CombinedOutput(); err != nil {
		t.Fatalf("flush %s: %v: %s", ChainServices, err, out)
	}
	if moved, err := w.Changed(ctx); err != nil || !moved {
		t.Fatalf("after %s was flushed: Changed = %v, %v; want true", ChainServices, moved, err)
	}
	st, err := w.Sync(ctx, tbl, true)
	if err != nil || !st.Drift {
		t.Fatalf("repairing Sync = %+v, %v; want drift", st, err)
	}
	want := Render(tbl, ipfamily.IPv4).Chains(TableNAT)[ChainServices]
	if got := natTable(t, k, ipfamily.IPv4, TableNAT).Chains[ChainServices]; got == nil || len(got.Rules) != len(want.Rules) {
		t.Fatalf("%s after the repair: %+v, want %d rules", ChainServices, got, len(want.Rules))
	}
	if moved, err := w.Changed(ctx); err != nil || moved {
		t.Fatalf("after the repair: Changed = %v, %v", moved, err)
	}
	if out, err := ns.Command("nft", "add", "table", "ip", "bystander").CombinedOutput(); err != nil {
		t.Fatalf("nft add table: %v: %s", err, out)
	}
	if moved, err := w.Changed(ctx); err != nil || !moved {
		t.Fatalf("after another agent's commit: Changed = %v, %v; want true", moved, err)
	}
}

// savingRunner counts the tables saved through it.
type savingRunner struct {
	*ipt.Fake
	saves int
}

func (s *savingRunner) Save(ctx context.Context, f ipfamily.Family, table string) ([]byte, error) {
	s.saves++
	return s.Fake.Save(ctx, f, table)
}

// TestGenerationWatchReadsNoCanary: once a Sync recorded the generation,
// Changed answers from it alone and never saves a table (iptables-nft-save
// loads the whole ruleset), even after the canary interval.
func TestGenerationWatchReadsNoCanary(t *testing.T) {
	ctx := context.Background()
	run := &savingRunner{Fake: ipt.NewFake()}
	b := New(run, ipfamily.IPv4)
	w := WatchGeneration(b, func(context.Context) (uint32, error) { return 3, nil })
	if _, err := w.Sync(ctx, featureTable(t, testNode()), false); err != nil {
		t.Fatal(err)
	}
	b.lastCanary = time.Time{} // the canary would be due
	before := run.saves
	if moved, err := w.Changed(ctx); err != nil || moved {
		t.Fatalf("Changed = %v, %v", moved, err)
	}
	if run.saves != before {
		t.Errorf("Changed saved %d tables; want none (the generation answers)", run.saves-before)
	}
}
