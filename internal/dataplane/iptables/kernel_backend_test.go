package iptables

import (
	"context"
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestKernelBackend runs the backend against the kernel, in a throwaway
// namespace, through both iptables variants: the probe leaves nothing,
// a sync programs the feature table in both families, a restarted backend
// adopts it without drift or change, a flushed chain is repaired with
// drift, and Cleanup leaves the built-in chains empty.
func TestKernelBackend(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx := context.Background()
	for _, v := range []ipt.Variant{ipt.NFT, ipt.Legacy} {
		t.Run(string(v), func(t *testing.T) {
			ns := netnstest.New(t, "iptb")
			k := &ipt.Exec{Variant: v, Command: ns.CommandContext}
			empty := map[ipfamily.Family]string{}
			for _, f := range ipfamily.All {
				empty[f] = ownState(t, k, f)
			}
			b := New(k)
			if err := b.Probe(ctx); err != nil {
				t.Fatalf("Probe: %v", err)
			}
			for _, f := range ipfamily.All {
				if got := ownState(t, k, f); got != empty[f] {
					t.Fatalf("%s after the probe:\n%s", f, got)
				}
			}
			tbl := featureTable(t, testNode())
			if st, err := b.Sync(ctx, tbl, false); err != nil || !st.Full {
				t.Fatalf("Sync = %+v, %v", st, err)
			}
			programmed := map[ipfamily.Family]string{}
			for _, f := range ipfamily.All {
				programmed[f] = ownState(t, k, f)
				nat := natTable(t, k, f, TableNAT)
				for name, c := range Render(tbl, f).Chains(TableNAT) {
					if got := nat.Chains[name]; got == nil || len(got.Rules) != len(c.Rules) {
						t.Errorf("%s: chain %s not as rendered", f, name)
					}
				}
			}
			b2 := New(k)
			if st, err := b2.Sync(ctx, tbl, false); err != nil || st.Drift {
				t.Fatalf("adopting Sync = %+v, %v", st, err)
			}
			svc := Render(tbl, ipfamily.IPv4).Ports[0].Chains[0].Name
			if err := k.Restore(ctx, ipfamily.IPv4, []byte("*nat\n:"+svc+" - [0:0]\nCOMMIT\n")); err != nil {
				t.Fatal(err)
			}
			if st, err := b2.Sync(ctx, tbl, true); err != nil || !st.Drift {
				t.Fatalf("repairing Sync = %+v, %v; want drift", st, err)
			}
			for _, f := range ipfamily.All {
				if got := ownState(t, k, f); got != programmed[f] {
					t.Errorf("%s: after adoption and repair:\n%s\nwant\n%s", f, got, programmed[f])
				}
			}
			if err := b2.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			for _, f := range ipfamily.All {
				if got := ownState(t, k, f); got != empty[f] {
					t.Errorf("%s after Cleanup:\n%s", f, got)
				}
			}
		})
	}
}

// TestKernelEditsSharedChains: the in-place edits of a partial sync (-I and
// -D by rule number in KUBE-SERVICES) leave the kernel, through both
// variants, as a full sync of the same table does.
func TestKernelEditsSharedChains(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, v := range []ipt.Variant{ipt.NFT, ipt.Legacy} {
		t.Run(string(v), func(t *testing.T) {
			ns := netnstest.New(t, "iptedit")
			editsSharedChains(t, &ipt.Exec{Variant: v, Command: ns.CommandContext})
		})
	}
}
