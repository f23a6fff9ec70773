package nftables

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// kernelMatches requires the fake kernel to hold exactly what Render(t) says:
// the same svcnet tables, each equal.
func kernelMatches(t *testing.T, k *nft.Fake, tbl *servicetable.Table) {
	t.Helper()
	if d := cmp.Diff(renderAll(Render(tbl)), kernelDump(t, k)); d != "" {
		t.Fatalf("kernel differs from a fresh render (-want +got):\n%s", d)
	}
}

// kernelDump renders every svcnet table the fake kernel holds, IPv4 first,
// each family's tables in name order.
func kernelDump(t *testing.T, k *nft.Fake) string {
	t.Helper()
	ctx := context.Background()
	var tables []*nft.Table
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		ts, err := nft.ReadTables(ctx, k, f, IsTable)
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, ts...)
	}
	return renderAll(tables)
}

func renderAll(tables []*nft.Table) string {
	var b strings.Builder
	for _, tb := range tables {
		b.WriteString(tb.Render())
	}
	return b.String()
}

func clonePorts(t *servicetable.Table) *servicetable.Table {
	c := *t
	c.Ports = slices.Clone(t.Ports)
	return &c
}

func replacePort(t *servicetable.Table, id string, fn func(sp *servicetable.ServicePort)) {
	for i, sp := range t.Ports {
		if sp.ID == id {
			cp := *sp
			fn(&cp)
			t.Ports[i] = &cp
			return
		}
	}
	panic("no port " + id)
}

func TestSyncFullThenPartialEqualsFreshRender(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	b := New(k)
	tbl := featureTable()
	st, err := b.Sync(ctx, tbl, false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full || st.TotalOps() == 0 {
		t.Fatalf("first sync: %+v", st)
	}
	kernelMatches(t, k, tbl)

	steps := []struct {
		name string
		edit func(t *servicetable.Table)
		// touched must be the only Service names in the transaction's chain ops.
		touched string
	}{
		{"scale down", func(t *servicetable.Table) {
			replacePort(t, "default/clusterip:http/TCP", func(sp *servicetable.ServicePort) {
				setEndpoints(sp, sp.ClusterEndpoints[:1]...)
			})
		}, "default/clusterip/"},
		{"to no endpoints", func(t *servicetable.Table) {
			replacePort(t, "default/clusterip:http/TCP", func(sp *servicetable.ServicePort) { setEndpoints(sp) })
		}, "default/clusterip/"},
		{"endpoints back", func(t *servicetable.Table) {
			replacePort(t, "default/clusterip:http/TCP", func(sp *servicetable.ServicePort) {
				setEndpoints(sp, ep("192.168.2.50", 8080, false), ep("192.168.1.50", 8080, true))
			})
		}, "default/clusterip/"},
		{"affinity on", func(t *servicetable.Table) {
			replacePort(t, "default/nodeport:/TCP", func(sp *servicetable.ServicePort) { sp.AffinityTimeout = 60e9 })
		}, "default/nodeport/"},
		{"affinity off and one endpoint gone", func(t *servicetable.Table) {
			replacePort(t, "default/affinity:/TCP", func(sp *servicetable.ServicePort) {
				sp.AffinityTimeout = 0
				setEndpoints(sp, sp.ClusterEndpoints[1:]...)
			})
		}, "default/affinity/"},
		{"etp to local", func(t *servicetable.Table) {
			replacePort(t, "default/lb:http/TCP", func(sp *servicetable.ServicePort) { sp.ExternalPolicyLocal = true })
		}, "default/lb/"},
		{"source ranges dropped", func(t *servicetable.Table) {
			replacePort(t, "default/lb:http/TCP", func(sp *servicetable.ServicePort) { sp.SourceRanges = nil })
		}, "default/lb/"},
		{"delete a port", func(t *servicetable.Table) {
			t.Ports = slices.DeleteFunc(t.Ports, func(sp *servicetable.ServicePort) bool { return sp.ID == "default/sctp:/SCTP" })
		}, "default/sctp/"},
		{"add a port", func(t *servicetable.Table) {
			t.Ports = append(t.Ports, sp("other", "new", "", model.ProtocolUDP, "10.96.5.5", 53, ep("192.168.3.3", 53, false)))
			sortPorts(t)
		}, "other/new/"},
	}
	for _, s := range steps {
		next := clonePorts(tbl)
		s.edit(next)
		var seen *nft.Tx
		k.FailApply = func(tx *nft.Tx) error { seen = tx; return nil }
		st, err := b.Sync(ctx, next, false)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if st.Full {
			t.Fatalf("%s: partial sync turned full", s.name)
		}
		if seen == nil {
			t.Fatalf("%s: nothing applied", s.name)
		}
		for _, op := range seen.Ops {
			if op.Kind == nft.OpAddChain || op.Kind == nft.OpFlushChain || op.Kind == nft.OpDeleteChain || op.Kind == nft.OpAddRule {
				if !strings.Contains(op.Name, s.touched) {
					t.Fatalf("%s: transaction touched chain %q", s.name, op.Name)
				}
			}
		}
		kernelMatches(t, k, next)
		tbl = next
	}
}

func TestSyncRandomChangesConverge(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	b := New(k)
	rng := rand.New(rand.NewPCG(1, 2))
	tbl := featureTable()
	if _, err := b.Sync(ctx, tbl, false); err != nil {
		t.Fatal(err)
	}
	pool := []servicetable.Endpoint{ep("192.168.1.1", 80, true), ep("192.168.2.2", 80, false), ep("192.168.3.3", 81, false), ep("192.168.1.4", 80, true)}
	for i := 0; i < 200; i++ {
		next := clonePorts(tbl)
		n := rng.IntN(len(next.Ports))
		id := next.Ports[n].ID
		if next.Ports[n].Family != ipfamily.IPv4 {
			continue
		}
		replacePort(next, id, func(sp *servicetable.ServicePort) {
			var eps []servicetable.Endpoint
			for _, e := range pool {
				if rng.IntN(2) == 0 {
					eps = append(eps, e)
				}
			}
			setEndpoints(sp, eps...)
			if rng.IntN(4) == 0 {
				sp.AffinityTimeout = 0
				if sp.AffinityTimeout == 0 && rng.IntN(2) == 0 {
					sp.AffinityTimeout = 30e9
				}
			}
			if rng.IntN(5) == 0 {
				sp.InternalPolicyLocal = !sp.InternalPolicyLocal
			}
			if rng.IntN(5) == 0 && sp.HasExternalFrontends() {
				sp.ExternalPolicyLocal = !sp.ExternalPolicyLocal
			}
		})
		if _, err := b.Sync(ctx, next, false); err != nil {
			t.Fatalf("step %d (%s): %v", i, id, err)
		}
		tbl = next
	}
	kernelMatches(t, k, tbl)
}

func TestFailedSyncLeavesKernelAndForcesFullResync(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	b := New(k)
	tbl := featureTable()
	if _, err := b.Sync(ctx, tbl, false); err != nil {
		t.Fatal(err)
	}
	before := kernelDump(t, k)
	next := clonePorts(tbl)
	replacePort(next, "default/clusterip:http/TCP", func(sp *servicetable.ServicePort) { setEndpoints(sp) })
	k.FailApply = func(*nft.Tx) error { return errors.New("injected: ENOBUFS") }
	if _, err := b.Sync(ctx, next, false); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("err = %v", err)
	}
	if after := kernelDump(t, k); before != after {
		t.Fatal("failed sync changed the kernel")
	}
	k.FailApply = nil
	st, err := b.Sync(ctx, next, false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full {
		t.Fatal("sync after a failure was not full")
	}
	kernelMatches(t, k, next)
}

func TestDriftRepairedAndRestartAdopts(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	tbl := featureTable()
	if _, err := New(k).Sync(ctx, tbl, false); err != nil {
		t.Fatal(err)
	}
	// A restarted proxy finds its table and changes nothing; the rules it
	// reads back carry the kernel's handles, which are no drift.
	handles := 0
	for _, name := range []string{TableName, ShardTable(0)} {
		got, err := k.Read(ctx, ipfamily.IPv4, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Chains {
			for _, r := range c.Rules {
				if r.Handle != 0 {
					handles++
				}
			}
		}
	}
	if handles == 0 {
		t.Fatal("rules read back without handles")
	}
	b := New(k)
	applied := k.Applied
	st, err := b.Sync(ctx, tbl, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalOps() != 0 || k.Applied != applied || st.Drift {
		t.Fatalf("adoption applied %d ops (%+v)", st.TotalOps(), st)
	}
	// Someone flushes a service chain and deletes a map element.
	k.Mutate(ipfamily.IPv4, ShardTable(0), func(t *nft.Table) *nft.Table {
		for n, c := range t.Chains {
			if strings.HasPrefix(n, "service-") {
				c.Rules = nil
				break
			}
		}
		for k := range t.Sets[mapServiceIPs].Elements {
			delete(t.Sets[mapServiceIPs].Elements, k)
			break
		}
		return t
	})
	st, err = b.Sync(ctx, tbl, true)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Drift {
		t.Fatalf("drift not reported: %+v", st)
	}
	kernelMatches(t, k, tbl)
	// Someone deletes the whole tables.
	k.Mutate(ipfamily.IPv4, TableName, func(*nft.Table) *nft.Table { return nil })
	k.Mutate(ipfamily.IPv4, ShardTable(0), func(*nft.Table) *nft.Table { return nil })
	if _, err := b.Sync(ctx, tbl, true); err != nil {
		t.Fatal(err)
	}
	kernelMatches(t, k, tbl)
	if err := Cleanup(ctx, k); err != nil {
		t.Fatal(err)
	}
	if d := kernelDump(t, k); d != "" {
		t.Fatalf("tables left after cleanup:\n%s", d)
	}
	if err := Cleanup(ctx, k); err != nil {
		t.Fatalf("second cleanup: %v", err)
	}
}

// A ClusterIP shared by two ports of a Service stays in cluster-ips until
// its last port goes; partial syncs keep the set equal to a fresh render.
func TestSharedClusterIPCounted(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	b := New(k)
	e := ep("192.168.1.10", 80, true)
	http := sp("default", "two", "http", model.ProtocolTCP, "10.96.0.50", 80, e)
	https := sp("default", "two", "https", model.ProtocolTCP, "10.96.0.50", 443, e)
	other := sp("default", "one", "", model.ProtocolTCP, "10.96.0.51", 80, e)
	steps := [][]*servicetable.ServicePort{
		{other},
		{http, https, other},
		{https, other}, // one port of the pair goes: the address stays
		{other},        // the last one goes
		{http, other},  // it comes back
		{},
	}
	for i, ports := range steps {
		tbl := &servicetable.Table{Node: testNode(), Ports: ports}
		st, err := b.Sync(ctx, tbl, false)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if i > 0 && st.Full {
			t.Fatalf("step %d was a full sync", i)
		}
		kernelMatches(t, k, tbl)
	}
}
