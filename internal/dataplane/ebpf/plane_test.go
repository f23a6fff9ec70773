package ebpf

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	cebpf "github.com/cilium/ebpf"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

func newTestPlane(t *testing.T) (*Plane, *fakeLB, *fakeRules) {
	t.Helper()
	lb, rules := newFakeLB(), &fakeRules{}
	return New(rules, func() (SocketLB, error) { return lb, nil }, nil), lb, rules
}

func table(ports ...*servicetable.ServicePort) *servicetable.Table {
	return &servicetable.Table{Ports: ports}
}

func mustSync(t *testing.T, p *Plane, tb *servicetable.Table, full bool) dataplane.Stats {
	t.Helper()
	st, err := p.Sync(context.Background(), tb, full)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// held renders what the fake holds, sorted, for comparisons.
func held(lb *fakeLB) []string {
	var out []string
	for k, bes := range lb.held {
		out = append(out, fmt.Sprintf("%v/%s->%v", k.Frontend, k.Protocol, bes))
	}
	slices.Sort(out)
	return out
}

func TestSyncProgramsChangesOnly(t *testing.T) {
	p, lb, rules := newTestPlane(t)
	a := clusterIPPort("default/a:80/tcp", "10.96.0.1:80", ep("192.168.1.2:8080", true))
	b := clusterIPPort("default/b:80/tcp", "10.96.0.2:80", ep("192.168.1.3:8080", true), ep("192.168.2.3:8080", false))
	c := clusterIPPort("default/c:80/tcp", "[fd00:96::3]:80")
	st := mustSync(t, p, table(a, b, c), false)
	want := []string{
		"10.96.0.1:80/TCP->[192.168.1.2:8080]",
		"10.96.0.2:80/TCP->[192.168.1.3:8080 192.168.2.3:8080]",
		"[fd00:96::3]:80/TCP->[]",
	}
	if got := held(lb); !slices.Equal(got, want) {
		t.Fatalf("first sync holds %q, want %q", got, want)
	}
	if !st.Full || st.Ops[ipfamily.IPv4] != 1+2 || st.Ops[ipfamily.IPv6] != 1 || rules.syncs != 1 {
		t.Fatalf("first sync: stats %+v, rules synced %d times; want full, 3 IPv4 ops (1 rules), 1 IPv6", st, rules.syncs)
	}

	// Nothing changed: no map call.
	calls := lb.calls
	mustSync(t, p, table(a, b, c), false)
	if lb.calls != calls {
		t.Fatalf("unchanged table: %d map calls, want none", lb.calls-calls)
	}

	// b's endpoints change, c is deleted, d is added; a's entry is the same
	// pointer and is not looked at.
	b2 := clusterIPPort("default/b:80/tcp", "10.96.0.2:80", ep("192.168.2.3:8080", false))
	d := clusterIPPort("default/d:53/tcp", "10.96.0.4:53", ep("192.168.1.9:53", true))
	calls = lb.calls
	st = mustSync(t, p, table(a, b2, d), false)
	want = []string{
		"10.96.0.1:80/TCP->[192.168.1.2:8080]",
		"10.96.0.2:80/TCP->[192.168.2.3:8080]",
		"10.96.0.4:53/TCP->[192.168.1.9:53]",
	}
	if got := held(lb); !slices.Equal(got, want) {
		t.Fatalf("after the change: holds %q, want %q", got, want)
	}
	if lb.calls-calls != 3 || st.Full || lb.unreaped() != 0 {
		t.Fatalf("partial sync: %d map calls (want 3), full %v, %d sets left unreaped", lb.calls-calls, st.Full, lb.retired)
	}

	// A full sync of the same table changes nothing either.
	calls = lb.calls
	if st := mustSync(t, p, table(a, b2, d), true); !st.Full || lb.calls != calls {
		t.Fatalf("full sync of what is held: %d map calls, full %v; want none, full", lb.calls-calls, st.Full)
	}
}

func TestSyncFailureUndoes(t *testing.T) {
	p, lb, _ := newTestPlane(t)
	a := clusterIPPort("default/a:80/tcp", "10.96.0.1:80", ep("192.168.1.2:8080", true))
	b := clusterIPPort("default/b:80/tcp", "10.96.0.2:80", ep("192.168.1.3:8080", true))
	mustSync(t, p, table(a, b), false)
	before := held(lb)

	// The second of three changes fails: the first is undone.
	a2 := clusterIPPort("default/a:80/tcp", "10.96.0.1:80", ep("192.168.2.2:8080", false))
	c := clusterIPPort("default/c:80/tcp", "10.96.0.3:80")
	lb.failAt = lb.calls + 2
	if _, err := p.Sync(context.Background(), table(a2, c), false); err == nil {
		t.Fatal("sync succeeded with a failing map update")
	}
	if got := held(lb); !slices.Equal(got, before) {
		t.Fatalf("after a failed sync: holds %q, want what it held before, %q", got, before)
	}

	// The next sync compares everything and gets there.
	st := mustSync(t, p, table(a2, c), false)
	want := []string{"10.96.0.1:80/TCP->[192.168.2.2:8080]", "10.96.0.3:80/TCP->[]"}
	if got := held(lb); !slices.Equal(got, want) || !st.Full {
		t.Fatalf("sync after a failure: holds %q (full %v), want %q, full", got, st.Full, want)
	}
}

func TestSyncRulesFailureLeavesSockets(t *testing.T) {
	p, lb, rules := newTestPlane(t)
	a := clusterIPPort("default/a:80/tcp", "10.96.0.1:80", ep("192.168.1.2:8080", true))
	mustSync(t, p, table(a), false)
	before, calls := held(lb), lb.calls
	rules.fail = errors.New("nftables: commit refused")
	a2 := clusterIPPort("default/a:80/tcp", "10.96.0.1:80")
	if _, err := p.Sync(context.Background(), table(a2), false); !errors.Is(err, rules.fail) {
		t.Fatalf("sync = %v, want the rules' error", err)
	}
	if got := held(lb); lb.calls != calls || !slices.Equal(got, before) {
		t.Fatalf("the rules failed but the socket load balancer changed: %q", got)
	}
}

func TestFamiliesFilter(t *testing.T) {
	lb := newFakeLB()
	p := New(&fakeRules{}, func() (SocketLB, error) { return lb, nil }, nil, ipfamily.IPv6)
	mustSync(t, p, table(clusterIPPort("default/a:80/tcp", "10.96.0.1:80"), clusterIPPort("default/a:80/tcp", "[fd00:96::1]:80")), false)
	if got := slices.Collect(maps.Keys(lb.held)); len(got) != 1 || !got[0].Frontend.Addr().Is6() {
		t.Fatalf("IPv6-only plane holds %v", got)
	}
}

func TestProbeNotSupported(t *testing.T) {
	p := New(&fakeRules{}, func() (SocketLB, error) {
		return nil, fmt.Errorf("attach connect4: %w", cebpf.ErrNotSupported)
	}, nil)
	if err := p.Probe(context.Background()); !errors.Is(err, dataplane.ErrNotSupported) {
		t.Fatalf("Probe = %v, want an error wrapping dataplane.ErrNotSupported", err)
	}
	p, lb, _ := newTestPlane(t)
	if err := p.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil || !lb.closed {
		t.Fatalf("Close = %v, load balancer closed %v", err, lb.closed)
	}
}

// The plane's scheduler applies to ports without one; a port's own wins.
func TestSchedulerDefault(t *testing.T) {
	p, lb, _ := newTestPlane(t)
	p.SetScheduler(socklb.RoundRobin)
	a := clusterIPPort("default/a:80/tcp", "10.96.0.1:80", ep("192.168.1.2:8080", true))
	b := clusterIPPort("default/b:80/tcp", "10.96.0.2:80", ep("192.168.1.3:8080", true))
	b.Scheduler = "sh"
	mustSync(t, p, table(a, b), false)
	for fe, want := range map[string]socklb.Scheduler{"10.96.0.1:80": socklb.RoundRobin, "10.96.0.2:80": socklb.SourceHash} {
		if got := lb.policy[key{ap(fe), model.ProtocolTCP}].Scheduler; got != want {
			t.Errorf("%s: scheduler %q, want %q", fe, got, want)
		}
	}
}
