package iptables

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// natChains returns the nat table's chains of the fake, read back.
func natTable(t *testing.T, r ipt.Runner, f ipfamily.Family, table string) *ipt.Table {
	t.Helper()
	out, err := r.Save(context.Background(), f, table)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := ipt.ParseSave(out)
	if err != nil {
		t.Fatal(err)
	}
	return tables[table]
}

// ownState returns the plane's chains of both tables with their rules,
// rendered, for comparing kernel states.
func ownState(t *testing.T, r ipt.Runner, f ipfamily.Family) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{TableFilter, TableNAT} {
		b.Write(natTable(t, r, f, table).Save())
	}
	return b.String()
}

func TestBackendSyncs(t *testing.T) {
	ctx := context.Background()
	k := ipt.NewFake()
	b := New(k, ipfamily.IPv4)
	node := testNode()
	svcs, sls := featureObjects()
	asm := servicetable.NewAssembler(node)
	for _, sv := range svcs {
		setService(t, asm, node, sv, sls)
	}
	t1 := asm.Table()
	st, err := b.Sync(ctx, t1, false)
	if err != nil || !st.Full || st.TotalOps() == 0 {
		t.Fatalf("first sync = %+v, %v; want full", st, err)
	}
	rs := Render(t1, ipfamily.IPv4)
	nat := natTable(t, k, ipfamily.IPv4, TableNAT)
	for name, c := range rs.Chains(TableNAT) {
		if got := nat.Chains[name]; got == nil || len(got.Rules) != len(c.Rules) {
			t.Fatalf("chain %s not programmed as rendered", name)
		}
	}
	for _, j := range Jumps {
		if !jumpsTo(natTable(t, k, ipfamily.IPv4, j.Table).Chains[j.From], j.To) {
			t.Errorf("jump %s %s -> %s missing", j.Table, j.From, j.To)
		}
	}
	if !strings.Contains(string(must(k.Save(ctx, ipfamily.IPv4, "mangle"))), ":"+ChainCanary+" ") {
		t.Error("no canary")
	}
	before := ownState(t, k, ipfamily.IPv4)

	// Nothing changed: a partial sync writes nothing.
	if st, err := b.Sync(ctx, t1, false); err != nil || st.Full || st.TotalOps() != 0 {
		t.Fatalf("idle sync = %+v, %v", st, err)
	}
	// One Service loses an endpoint: a partial sync rewrites its chains
	// and deletes the endpoint's KUBE-SEP chain.
	for i, sl := range sls {
		if sl.Service == "web" {
			cp := *sl
			cp.Endpoints = cp.Endpoints[:2]
			sls[i] = &cp
		}
	}
	for _, sv := range svcs {
		if sv.Name == "web" {
			setService(t, asm, node, sv, sls)
		}
	}
	t2 := asm.Table()
	st, err = b.Sync(ctx, t2, false)
	if err != nil || st.Full {
		t.Fatalf("partial sync = %+v, %v", st, err)
	}
	if full := countOps(Render(t2, ipfamily.IPv4).Full()); st.TotalOps() >= full {
		t.Errorf("partial sync wrote %d ops, a full one %d", st.TotalOps(), full)
	}
	gone := Render(t2, ipfamily.IPv4).Stale(rs)
	if len(gone) != 1 || !strings.HasPrefix(gone[0], prefixEndpoint) {
		t.Fatalf("stale chains %v, want one KUBE-SEP", gone)
	}
	if natTable(t, k, ipfamily.IPv4, TableNAT).Chains[gone[0]] != nil {
		t.Errorf("chain %s of the removed endpoint is still there", gone[0])
	}

	// A restarted proxy adopts the kernel's state: no drift, no change of
	// the rules, and the jumps are not inserted twice.
	after := ownState(t, k, ipfamily.IPv4)
	b2 := New(k, ipfamily.IPv4)
	st, err = b2.Sync(ctx, t2, false)
	if err != nil || !st.Full || st.Drift || st.TotalOps() != 0 {
		t.Fatalf("adopting sync = %+v, %v; want full with 0 ops", st, err)
	}
	if got := ownState(t, k, ipfamily.IPv4); got != after {
		t.Errorf("adoption changed the kernel:\n%s\nwas\n%s", got, after)
	}
	if got := ownState(t, k, ipfamily.IPv4); got == before {
		t.Error("the partial sync changed nothing")
	}

	// Someone flushes a chain: the next full sync repairs it, with drift.
	svc := Render(t2, ipfamily.IPv4).Ports[0].Chains[0].Name
	if err := k.Restore(ctx, ipfamily.IPv4, []byte("*nat\n:"+svc+" - [0:0]\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	st, err = b2.Sync(ctx, t2, true)
	if want := 1 + len(Render(t2, ipfamily.IPv4).Ports[0].Chains[0].Rules); err != nil || !st.Drift || st.TotalOps() != want {
		t.Fatalf("repairing sync = %+v, %v; want drift and %d ops (the flushed chain only)", st, err, want)
	}
	if got := ownState(t, k, ipfamily.IPv4); got != after {
		t.Errorf("drift not repaired:\n%s", got)
	}
}

// TestBackendChanged: the canary's removal is seen (at most every
// CanaryInterval).
func TestBackendChanged(t *testing.T) {
	ctx := context.Background()
	k := ipt.NewFake()
	b := New(k, ipfamily.IPv4)
	if moved, err := b.Changed(ctx); err != nil || moved {
		t.Fatalf("Changed before a sync = %v, %v", moved, err)
	}
	if _, err := b.Sync(ctx, featureTable(t, testNode()), false); err != nil {
		t.Fatal(err)
	}
	b.lastCanary = time.Time{}
	if moved, err := b.Changed(ctx); err != nil || moved {
		t.Fatalf("Changed after our sync = %v, %v", moved, err)
	}
	if err := k.Restore(ctx, ipfamily.IPv4, []byte("*mangle\n-X "+ChainCanary+"\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	if moved, _ := b.Changed(ctx); moved {
		t.Error("Changed read the kernel again within CanaryInterval")
	}
	b.lastCanary = time.Time{}
	if moved, err := b.Changed(ctx); err != nil || !moved {
		t.Fatalf("Changed after the canary went = %v, %v; want true", moved, err)
	}
}

// TestBackendCleanup removes the plane's chains and jumps from both
// families and leaves others' rules.
func TestBackendCleanup(t *testing.T) {
	ctx := context.Background()
	k := ipt.NewFake()
	const foreign = "*nat\n:OTHER - [0:0]\n-A OTHER -j RETURN\n-I PREROUTING -j OTHER\nCOMMIT\n"
	for _, f := range ipfamily.All {
		if err := k.Restore(ctx, f, []byte(foreign)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(k).Sync(ctx, featureTable(t, testNode()), false); err != nil {
		t.Fatal(err)
	}
	if err := New(k).Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range ipfamily.All {
		for _, table := range []string{TableFilter, TableNAT, "mangle"} {
			tb := natTable(t, k, f, table)
			for _, n := range tb.ChainNames() {
				if n != "OTHER" && !ipt.IsBuiltin(table, n) {
					t.Errorf("%s %s: chain %s left", f, table, n)
				}
				for _, r := range tb.Chains[n].Rules {
					if ipt.JumpTarget(r) != "OTHER" && n != "OTHER" {
						t.Errorf("%s %s: rule %q left in %s", f, table, r, n)
					}
				}
			}
		}
		if n := len(natTable(t, k, f, TableNAT).Chains["PREROUTING"].Rules); n != 1 {
			t.Errorf("%s: foreign jump gone (%d rules in PREROUTING)", f, n)
		}
	}
}

// TestBackendProbe: the probe leaves nothing, and a kernel without one
// extension is named.
func TestBackendProbe(t *testing.T) {
	ctx := context.Background()
	k := ipt.NewFake()
	b := New(k)
	if err := b.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range ipfamily.All {
		for _, table := range []string{TableFilter, TableNAT} {
			if got := string(must(k.Save(ctx, f, table))); got != string(ipt.NewTable(table).Save()) {
				t.Errorf("%s %s after the probe:\n%s", f, table, got)
			}
		}
	}
	k.Refuse = func(spec string) error {
		if strings.Contains(spec, "-m statistic") {
			return errors.New("Couldn't load match `statistic'")
		}
		return nil
	}
	err := b.Probe(ctx)
	if !errors.Is(err, dataplane.ErrNotSupported) || !strings.Contains(err.Error(), "kernel lacks xt_statistic") {
		t.Fatalf("Probe = %v, want xt_statistic named", err)
	}
	for _, table := range []string{TableFilter, TableNAT} {
		if got := string(must(k.Save(ctx, ipfamily.IPv4, table))); got != string(ipt.NewTable(table).Save()) {
			t.Errorf("%s after a failed probe:\n%s", table, got)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// featureObjects returns the feature table's objects.
func featureObjects() ([]*model.Service, []*model.EndpointSlice) {
	var svcs []*model.Service
	var sls []*model.EndpointSlice
	for _, f := range features() {
		svcs = append(svcs, f.svcs...)
		sls = append(sls, f.slices...)
	}
	return svcs, sls
}

// setService builds sv's entries from its slices among sls into asm.
func setService(t *testing.T, asm *servicetable.Assembler, node servicetable.NodeConfig, sv *model.Service, sls []*model.EndpointSlice) {
	t.Helper()
	st := &model.ServiceState{Service: sv}
	for _, sl := range sls {
		if sl.Namespace == sv.Namespace && sl.Service == sv.Name {
			st.Slices = append(st.Slices, sl)
		}
	}
	ports, serr := servicetable.BuildService(st, node)
	if serr != nil {
		t.Fatalf("service %s: %v", sv.Name, serr)
	}
	asm.Set(sv.Key(), ports, nil)
}

// countingRunner counts the restores that reach the fake kernel and keeps
// the last one's input.
type countingRunner struct {
	*ipt.Fake
	restores int
	last     string
}

func (c *countingRunner) Restore(ctx context.Context, f ipfamily.Family, input []byte) error {
	c.restores++
	c.last = string(input)
	return c.Fake.Restore(ctx, f, input)
}

// TestBackendFullSyncBatches: a full sync into an empty kernel creates the
// per-port chains in restores of BatchPorts ports, then switches to them
// in one; the kernel ends as with one restore. When the switch fails, the
// chains the batches created are deleted again: the kernel is as it was.
func TestBackendFullSyncBatches(t *testing.T) {
	ctx := context.Background()
	tbl := featureTable(t, testNode())
	rs := Render(tbl, ipfamily.IPv4)
	one := ipt.NewFake()
	b := New(one, ipfamily.IPv4)
	b.BatchPorts = 0
	if _, err := b.Sync(ctx, tbl, true); err != nil {
		t.Fatal(err)
	}
	k := &countingRunner{Fake: ipt.NewFake()}
	b = New(k, ipfamily.IPv4)
	b.BatchPorts = 2
	st, err := b.Sync(ctx, tbl, true)
	if err != nil {
		t.Fatal(err)
	}
	// The empty shared chains, the batches, the switch, the jumps.
	withChains := 0
	for _, p := range rs.Ports {
		if len(p.Chains) > 0 {
			withChains++
		}
	}
	if want := 1 + (withChains+1)/2 + 1 + 1; k.restores != want {
		t.Errorf("%d restores, want %d", k.restores, want)
	}
	if got, want := ownState(t, k.Fake, ipfamily.IPv4), ownState(t, one, ipfamily.IPv4); got != want {
		t.Errorf("batched full sync left\n%s\nwant\n%s", got, want)
	}
	if st.TotalOps() == 0 || st.Drift {
		t.Errorf("stats %+v", st)
	}

	fresh := ipt.NewFake()
	empty := ownState(t, fresh, ipfamily.IPv4)
	fresh.Refuse = func(spec string) error {
		if strings.HasSuffix(spec, "-j "+ChainNodePorts) {
			return errors.New("refused")
		}
		return nil
	}
	b = New(fresh, ipfamily.IPv4)
	b.BatchPorts = 2
	if _, err := b.Sync(ctx, tbl, true); err == nil {
		t.Fatal("sync with a refused KUBE-SERVICES rule succeeded")
	}
	if got := ownState(t, fresh, ipfamily.IPv4); got != empty {
		t.Errorf("failed full sync left\n%s\nwant the kernel as it was\n%s", got, empty)
	}
}

// TestBackendFrontendTakenOver: a partial sync in which a Service takes
// every frontend of the first LoadBalancer Service (its ClusterIP,
// NodePort and LoadBalancer IP), that Service gone, applies; a fresh
// backend then finds nothing to change. The taker is named before the
// Service it replaces, and after it.
func TestBackendFrontendTakenOver(t *testing.T) {
	ctx := context.Background()
	node := testNode()
	svcs, sls := featureObjects()
	var lb *model.Service
	for _, sv := range svcs {
		if sv.Type == model.ServiceTypeLoadBalancer {
			lb = sv
			break
		}
	}
	for _, taker := range []string{"aaa", "zzz"} {
		t.Run(taker, func(t *testing.T) {
			k := ipt.NewFake()
			b := New(k, ipfamily.IPv4)
			asm := servicetable.NewAssembler(node)
			for _, sv := range svcs {
				setService(t, asm, node, sv, sls)
			}
			if _, err := b.Sync(ctx, asm.Table(), false); err != nil {
				t.Fatal(err)
			}
			next := *lb
			next.Name = taker
			var nextSlices []*model.EndpointSlice
			for _, sl := range sls {
				if sl.Namespace == lb.Namespace && sl.Service == lb.Name {
					c := *sl
					c.Name, c.Service = taker+"-1", taker
					nextSlices = append(nextSlices, &c)
				}
			}
			asm.Set(lb.Key(), nil)
			setService(t, asm, node, &next, nextSlices)
			tbl := asm.Table()
			if st, err := b.Sync(ctx, tbl, false); err != nil || st.Full || st.TotalOps() == 0 {
				t.Fatalf("partial sync = %+v, %v", st, err)
			}
			if st, err := New(k, ipfamily.IPv4).Sync(ctx, tbl, false); err != nil || st.TotalOps() != 0 {
				t.Fatalf("a fresh backend changed %d ops (err %v): the kernel is not what the table renders", st.TotalOps(), err)
			}
		})
	}
}
