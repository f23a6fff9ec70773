package userspace

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// newTestBackend returns a backend over fake kernel k whose proxy ports
// listen on loopback, closed when the test ends.
func newTestBackend(t *testing.T, k nft.Conn) *Backend {
	t.Helper()
	b := NewBackend(k, Config{Listen: map[ipfamily.Family]netip.Addr{ipfamily.IPv4: loopback, ipfamily.IPv6: netip.IPv6Loopback()}})
	t.Cleanup(func() { b.Close() })
	return b
}

// kernelDump renders the plane's table of each family the kernel holds.
func kernelDump(t *testing.T, k nft.Conn) string {
	t.Helper()
	var tables []*nft.Table
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		ts, err := nft.ReadTables(context.Background(), k, f, Rules{}.Owns)
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, ts...)
	}
	return renderAll(tables)
}

// kernelMatches requires the kernel to hold exactly the rendering of tbl
// with b's current proxy ports, and the proxy to have exactly the ports
// tbl's served entries want.
func kernelMatches(t *testing.T, k nft.Conn, b *Backend, tbl *servicetable.Table) {
	t.Helper()
	rendered, err := b.Explainer().Render(tbl)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(renderAll(rendered), kernelDump(t, k)); d != "" {
		t.Fatalf("kernel differs from a render with the proxy's ports (-want +got):\n%s", d)
	}
	var want, got []string
	for _, sp := range tbl.Ports {
		if Served(sp) {
			for _, w := range wants(sp) {
				want = append(want, w.key.String())
			}
		}
	}
	for _, p := range b.Proxy().Ports() {
		got = append(got, p.Key.String())
	}
	slices.Sort(want)
	slices.Sort(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("proxy ports (-want +got):\n%s", d)
	}
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

func TestBackendSync(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	b := newTestBackend(t, k)
	tbl := simTable()
	st, err := b.Sync(ctx, tbl, false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full || st.Ops[ipfamily.IPv4] == 0 || st.Ops[ipfamily.IPv6] == 0 {
		t.Fatalf("first sync: %+v", st)
	}
	kernelMatches(t, k, b, tbl)
	if _, ok := b.Proxy().Addr(Key{ID: "default/sctp:9999/sctp", Family: ipfamily.IPv4}); ok {
		t.Error("an SCTP Service port got a proxy port")
	}
	if moved, err := b.Changed(ctx); err != nil || moved {
		t.Errorf("Changed after our own Sync = %v, %v", moved, err)
	}

	applied := k.Applied
	st, err = b.Sync(ctx, clonePorts(tbl), false)
	if err != nil || st.Full || st.TotalOps() != 0 || k.Applied != applied {
		t.Fatalf("unchanged sync: %+v, %v, %d transactions", st, err, k.Applied-applied)
	}

	steps := []struct {
		name string
		edit func(t *servicetable.Table)
	}{
		{"endpoints change: same proxy port, no commit", func(t *servicetable.Table) {
			replacePort(t, "default/web:http/tcp", func(sp *servicetable.ServicePort) { setEndpoints(sp, sp.ClusterEndpoints[:1]...) })
		}},
		{"ITP to local: a local proxy port", func(t *servicetable.Table) {
			replacePort(t, "default/web:http/tcp", func(sp *servicetable.ServicePort) { sp.InternalPolicyLocal = true })
		}},
		{"ETP back to cluster: the local proxy port closes", func(t *servicetable.Table) {
			replacePort(t, "default/etp:80/tcp", func(sp *servicetable.ServicePort) { sp.ExternalPolicyLocal = false })
		}},
		{"delete a port", func(t *servicetable.Table) {
			t.Ports = slices.DeleteFunc(t.Ports, func(sp *servicetable.ServicePort) bool { return sp.ID == "default/np:80/tcp" })
		}},
		{"add a port", func(t *servicetable.Table) {
			t.Ports = append(t.Ports, svc("new", "", model.ProtocolUDP, "10.96.5.5", 53, tep("192.168.3.3", 53, false)))
		}},
	}
	for _, s := range steps {
		next := clonePorts(tbl)
		s.edit(next)
		next = table(next.Node, next.Ports...)
		before := k.Applied
		st, err := b.Sync(ctx, next, false)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		commits := 1
		if strings.HasSuffix(s.name, "no commit") {
			commits = 0
		}
		if st.Full || k.Applied != before+commits {
			t.Fatalf("%s: %+v, %d transactions", s.name, st, k.Applied-before)
		}
		kernelMatches(t, k, b, next)
		tbl = next
	}
	if got := b.Proxy().port(Key{ID: "default/web:http/tcp", Family: ipfamily.IPv4, Set: SetLocal}).bal.size(); got != 1 {
		t.Errorf("web's local proxy port has %d endpoints, want 1", got)
	}
}

// TestBackendFailedSync: a commit that fails leaves the kernel's table and
// the proxy ports as they were, and the next Sync is full.
func TestBackendFailedSync(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	b := newTestBackend(t, k)
	tbl := simTable()
	if _, err := b.Sync(ctx, tbl, false); err != nil {
		t.Fatal(err)
	}
	kernel, ports := kernelDump(t, k), b.Proxy().Ports()
	next := clonePorts(tbl)
	next.Ports = append(next.Ports, svc("new", "", model.ProtocolTCP, "10.96.5.6", 80, tep("192.168.3.3", 80, false)))
	next.Ports = slices.DeleteFunc(next.Ports, func(sp *servicetable.ServicePort) bool { return sp.ID == "default/np:80/tcp" })
	replacePort(next, "default/web:http/tcp", func(sp *servicetable.ServicePort) { setEndpoints(sp) })
	next = table(next.Node, next.Ports...)
	boom := errors.New("boom")
	k.FailApply = func(*nft.Tx) error { return boom }
	if _, err := b.Sync(ctx, next, false); !errors.Is(err, boom) {
		t.Fatalf("Sync = %v, want the kernel's error", err)
	}
	if got := kernelDump(t, k); got != kernel {
		t.Errorf("the kernel changed after a failed sync:\n%s", cmp.Diff(kernel, got))
	}
	if d := cmp.Diff(ports, b.Proxy().Ports(), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
		t.Errorf("proxy ports changed after a failed sync (-before +after):\n%s", d)
	}
	web := b.Proxy().port(Key{ID: "default/web:http/tcp", Family: ipfamily.IPv4, Set: SetCluster})
	if web.bal.size() != 2 {
		t.Errorf("web's endpoints after a failed sync: %d, want the previous 2", web.bal.size())
	}
	k.FailApply = nil
	st, err := b.Sync(ctx, next, false)
	if err != nil || !st.Full {
		t.Fatalf("sync after a failure: %+v, %v; want a full one", st, err)
	}
	kernelMatches(t, k, b, next)
}

// TestBackendDriftAndAdoption: a table changed behind the plane's back is
// seen by Changed and repaired by a full Sync; a new instance (a restarted
// proxy) replaces the table it finds, in one transaction, with its own
// proxy ports.
func TestBackendDriftAndAdoption(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	b := newTestBackend(t, k)
	tbl := simTable()
	if _, err := b.Sync(ctx, tbl, false); err != nil {
		t.Fatal(err)
	}
	k.Mutate(ipfamily.IPv4, TableName, func(tb *nft.Table) *nft.Table {
		tb.Chains[chainPortalsContainer].Rules = nil
		return tb
	})
	if moved, err := b.Changed(ctx); err != nil || !moved {
		t.Fatalf("Changed after a foreign edit = %v, %v", moved, err)
	}
	st, err := b.Sync(ctx, tbl, true)
	if err != nil || !st.Drift || st.Ops[ipfamily.IPv4] == 0 || st.Ops[ipfamily.IPv6] != 0 {
		t.Fatalf("full sync after drift: %+v, %v; want drift repaired in ip only", st, err)
	}
	kernelMatches(t, k, b, tbl)
	st, err = b.Sync(ctx, tbl, true)
	if err != nil || st.Drift || st.TotalOps() != 0 {
		t.Fatalf("full sync of an equal kernel: %+v, %v", st, err)
	}

	b2 := newTestBackend(t, k)
	before := k.Applied
	st, err = b2.Sync(ctx, tbl, false)
	if err != nil || !st.Full || st.Drift || k.Applied != before+1 {
		t.Fatalf("adoption: %+v, %v, %d commits", st, err, k.Applied-before)
	}
	kernelMatches(t, k, b2, tbl)
}

func TestBackendCleanup(t *testing.T) {
	ctx := context.Background()
	k := nft.NewFake()
	foreign := nft.NewTx(ipfamily.IPv4, "other")
	foreign.AddTable()
	if err := k.Apply(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	b := newTestBackend(t, k)
	if _, err := b.Sync(ctx, simTable(), false); err != nil {
		t.Fatal(err)
	}
	if err := b.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if got := kernelDump(t, k); got != "" {
		t.Errorf("after Cleanup:\n%s", got)
	}
	if names, _ := k.Tables(ctx, ipfamily.IPv4); !slices.Equal(names, []string{"other"}) {
		t.Errorf("tables after Cleanup: %v, want the foreign one only", names)
	}
	if ps := b.Proxy().Ports(); len(ps) != 0 {
		t.Errorf("proxy ports after Cleanup: %v", ps)
	}
	if err := b.Cleanup(ctx); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
}

func TestBackendExplainer(t *testing.T) {
	r := Rules{}
	if !r.Owns(TableName) || r.Owns("svcnet") || r.Owns("svcnet-nat-00") {
		t.Error("Owns")
	}
	k := nft.NewFake()
	b := newTestBackend(t, k)
	tbl := simTable()
	if _, err := b.Sync(context.Background(), tbl, false); err != nil {
		t.Fatal(err)
	}
	rendered, err := b.Explainer().Render(tbl)
	if err != nil {
		t.Fatal(err)
	}
	got := renderAll(rendered)
	if !strings.Contains(got, "redirect to :") || got != kernelDump(t, k) {
		t.Errorf("Explainer().Render differs from the kernel")
	}
}

// size returns the number of endpoints.
func (b *balancer) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.endpoints)
}

// TestProbeCoversTheTable: the probe's checklist entries show every
// expression kind a rendered table uses, and the redirect.
func TestProbeCoversTheTable(t *testing.T) {
	probed := map[string]bool{}
	for _, ex := range nft.ExamplesFor(probeTable()) {
		xs := ex.Rule(ipfamily.IPv4).Exprs
		probed[fmt.Sprintf("%T", xs[len(xs)-1])] = true
	}
	tbl := simTable()
	for _, tb := range Render(tbl, fixedPorts(tbl)) {
		for _, c := range tb.Chains {
			for _, r := range c.Rules {
				for _, e := range r.Exprs {
					if !probed[fmt.Sprintf("%T", e)] {
						t.Errorf("%T (in %s) is not probed", e, r.Render(tb.Family))
					}
				}
			}
		}
	}
	if !probed["nft.Redirect"] {
		t.Error("the redirect is not probed")
	}
}
