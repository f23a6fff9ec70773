package ebpf

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/ebpf/tclb"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

func TestExternalEntries(t *testing.T) {
	local, remote := ep("192.168.1.5:8080", true), ep("192.168.2.7:8080", false)
	vip, lbIP, node := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("172.26.237.1"), netip.MustParseAddr("172.26.236.2")
	fes := []servicetable.Frontend{
		{Kind: servicetable.FrontendClusterIP, Addr: vip, Port: 80},
		{Kind: servicetable.FrontendLoadBalancer, Addr: lbIP, Port: 80},
		{Kind: servicetable.FrontendNodePort, Addr: node, Port: 30080},
	}
	base := func(mod func(*servicetable.ServicePort)) *servicetable.ServicePort {
		sp := &servicetable.ServicePort{ID: "default/web:80/tcp", Protocol: model.ProtocolTCP, Port: 80, NodePort: 30080,
			ClusterIP: vip, LoadBalancerIPs: []netip.Addr{lbIP}, Frontends: fes, HasEndpoints: true,
			ClusterEndpoints: []servicetable.Endpoint{local, remote}, AllEndpoints: []servicetable.Endpoint{local, remote}}
		mod(sp)
		return sp
	}
	both := func(x *external) []entry {
		return []entry{
			{Frontend: ap("172.26.237.1:80"), Protocol: model.ProtocolTCP, Backends: []netip.AddrPort{ap("192.168.1.5:8080"), ap("192.168.2.7:8080")}, External: x},
			{Frontend: ap("172.26.236.2:30080"), Protocol: model.ProtocolTCP, Backends: []netip.AddrPort{ap("192.168.1.5:8080"), ap("192.168.2.7:8080")}, External: x},
		}
	}
	cluster := &external{Local: []bool{true, false}}
	for _, tc := range []struct {
		name    string
		sp      *servicetable.ServicePort
		entries []entry
		left    []leftOut
	}{{
		name:    "Cluster policy: the LB IP and the NodePort to every endpoint, the ClusterIP not at all",
		sp:      base(func(*servicetable.ServicePort) {}),
		entries: both(cluster),
	}, {
		name: "Local policy: the local endpoints",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.ExternalPolicyLocal, sp.LocalEndpoints = true, []servicetable.Endpoint{local}
		}),
		entries: func() []entry {
			es := both(&external{Local: []bool{true}, LocalPolicy: true})
			for i := range es {
				es[i].Backends = es[i].Backends[:1]
			}
			return es
		}(),
	}, {
		name: "Local policy without a local endpoint: left to the rules, which drop",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.ExternalPolicyLocal = true
		}),
		left: []leftOut{{fes[1], leftExtNoEndpoints}, {fes[2], leftExtNoEndpoints}},
	}, {
		name: "no endpoint anywhere: left to the rules, which reject",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.HasEndpoints, sp.ClusterEndpoints, sp.AllEndpoints = false, nil, nil
		}),
		left: []leftOut{{fes[1], leftExtNoEndpoints}, {fes[2], leftExtNoEndpoints}},
	}, {
		name: "source ranges: the LB IP left to the firewall, the NodePort held",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.SourceRanges = []netip.Prefix{netip.MustParsePrefix("172.26.236.0/24")}
		}),
		entries: both(cluster)[1:],
		left:    []leftOut{{fes[1], leftSourceRanges}},
	}, {
		name: "ClientIP affinity: left to the rules",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.AffinityTimeout = time.Hour
		}),
		left: []leftOut{{fes[1], leftExtAffinity}, {fes[2], leftExtAffinity}},
	}, {
		name: "SCTP: left to the rules",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.Protocol = model.ProtocolSCTP
		}),
		left: []leftOut{{fes[1], leftSCTP}, {fes[2], leftSCTP}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			entries, left := externalEntries(tc.sp)
			if !reflect.DeepEqual(entries, tc.entries) {
				t.Errorf("entries:\n got %v\nwant %v", entries, tc.entries)
			}
			if !reflect.DeepEqual(left, tc.left) {
				t.Errorf("left:\n got %v\nwant %v", left, tc.left)
			}
			for _, e := range tc.entries {
				x, ok := ExternalFor(tc.sp, e.Frontend)
				if !ok || !x.Held || !reflect.DeepEqual(x.Backends, e.Backends) || !reflect.DeepEqual(x.Local, e.External.Local) ||
					x.LocalPolicy != e.External.LocalPolicy {
					t.Errorf("ExternalFor(%v) = %+v, %v; want held as %+v", e.Frontend, x, ok, e)
				}
			}
			for _, l := range tc.left {
				fe := netip.AddrPortFrom(l.Frontend.Addr, l.Frontend.Port)
				if x, ok := ExternalFor(tc.sp, fe); !ok || x.Held || x.Left != l.Reason {
					t.Errorf("ExternalFor(%v) = %+v, %v; want left: %s", fe, x, ok, l.Reason)
				}
			}
			if x, ok := ExternalFor(tc.sp, ap("10.96.0.10:80")); ok {
				t.Errorf("ExternalFor(the ClusterIP) = %+v, want none", x)
			}
		})
	}
}

// fakeExt tracks what a tc load balancer's maps hold; failAt makes the
// call of that number (1-based) fail.
type fakeExt struct {
	held   map[key]string
	left   []tclb.Held // what Held reports: an earlier load balancer's
	calls  int
	failAt int
	closed bool
}

func (f *fakeExt) SetService(fe netip.AddrPort, p model.Protocol, bes []tclb.Backend, pol tclb.Policy) error {
	if f.calls++; f.calls == f.failAt {
		return fmt.Errorf("fake: call %d fails", f.calls)
	}
	f.held[key{fe, p}] = fmt.Sprintf("%v/%s->%v local=%v", fe, p, bes, pol.Local)
	if pol.Maglev {
		f.held[key{fe, p}] += " maglev"
	}
	return nil
}

func (f *fakeExt) DeleteService(fe netip.AddrPort, p model.Protocol) error {
	if f.calls++; f.calls == f.failAt {
		return fmt.Errorf("fake: call %d fails", f.calls)
	}
	delete(f.held, key{fe, p})
	return nil
}

func (f *fakeExt) Close() error { f.closed = true; return nil }

func (f *fakeExt) Held() ([]tclb.Held, error) { return f.left, nil }

func (f *fakeExt) list() []string {
	out := make([]string, 0, len(f.held))
	for _, v := range f.held {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// nodePortPort is clusterIPPort with a NodePort on 172.26.236.177.
func nodePortPort(id, vip string, nodePort uint16, eps ...servicetable.Endpoint) *servicetable.ServicePort {
	sp := clusterIPPort(id, vip, eps...)
	sp.NodePort = nodePort
	sp.Frontends = append(sp.Frontends, servicetable.Frontend{Kind: servicetable.FrontendNodePort,
		Addr: netip.MustParseAddr("172.26.236.177"), Port: nodePort})
	return sp
}

func TestSyncExternal(t *testing.T) {
	p, lb, _ := newTestPlane(t)
	ext := &fakeExt{held: map[key]string{}}
	p.SetExternal(func(servicetable.NodeConfig) (ExternalLB, error) { return ext, nil })
	a := nodePortPort("default/a:80/tcp", "10.96.0.1:80", 30001, ep("192.168.1.2:8080", true), ep("192.168.2.2:8080", false))
	b := nodePortPort("default/b:80/tcp", "10.96.0.2:80", 30002)
	mustSync(t, p, table(a, b), false)
	want := []string{"172.26.236.177:30001/TCP->[{192.168.1.2:8080 true} {192.168.2.2:8080 false}] local=false"}
	if got := ext.list(); !slices.Equal(got, want) {
		t.Fatalf("tc load balancer holds %q, want %q", got, want)
	}
	if ext.calls != 1 {
		t.Errorf("tc calls = %d, want 1 (b has no endpoint: left to the rules)", ext.calls)
	}

	// b gains an endpoint: only b's entries change.
	b2 := nodePortPort("default/b:80/tcp", "10.96.0.2:80", 30002, ep("192.168.1.3:8080", true))
	calls := ext.calls
	mustSync(t, p, table(a, b2), false)
	if ext.calls-calls != 1 || len(ext.held) != 2 {
		t.Errorf("b gains an endpoint: %d tc calls, holds %q; want 1 call, 2 frontends", ext.calls-calls, ext.list())
	}

	// A failing tc change undoes the sync's socket changes too.
	before, beforeExt := held(lb), ext.list()
	a2 := nodePortPort("default/a:80/tcp", "10.96.0.1:80", 30001)
	ext.failAt = ext.calls + 1
	if _, err := p.Sync(context.Background(), table(a2, b2), false); err == nil {
		t.Fatal("sync succeeded with a failing tc map update")
	}
	if got, gotExt := held(lb), ext.list(); !slices.Equal(got, before) || !slices.Equal(gotExt, beforeExt) {
		t.Fatalf("after a failed sync: sockets %q, tc %q; want %q, %q", got, gotExt, before, beforeExt)
	}
	mustSync(t, p, table(a2, b2), false)
	if got := ext.list(); len(got) != 1 || got[0] != "172.26.236.177:30002/TCP->[{192.168.1.3:8080 true}] local=false" {
		t.Errorf("after the retry: tc holds %q, want only b's NodePort", got)
	}
	if err := p.Close(); err != nil || !ext.closed {
		t.Errorf("close = %v, tc closed %v", err, ext.closed)
	}
}

// TestExternalReopens: a change of the node's addresses opens the tc load
// balancer again, and the new one gets every frontend although the table's
// ports did not change; a node without addresses gets none.
func TestExternalReopens(t *testing.T) {
	p, _, _ := newTestPlane(t)
	var opened []*fakeExt
	p.SetExternal(func(nc servicetable.NodeConfig) (ExternalLB, error) {
		if len(nc.NodePortAddresses) == 0 {
			return nil, nil
		}
		f := &fakeExt{held: map[key]string{}}
		opened = append(opened, f)
		return f, nil
	})
	a := nodePortPort("default/a:80/tcp", "10.96.0.1:80", 30001, ep("192.168.1.2:8080", true))
	tb := table(a)
	mustSync(t, p, tb, false)
	if len(opened) != 0 {
		t.Fatalf("opened %d tc load balancers for a node without addresses, want none", len(opened))
	}
	tb.Node.NodePortAddresses = []netip.Addr{netip.MustParseAddr("172.26.236.177")}
	mustSync(t, p, tb, false)
	mustSync(t, p, tb, false)
	if len(opened) != 1 || len(opened[0].held) != 1 {
		t.Fatalf("after the node got an address: %d opened, want 1 holding a's NodePort", len(opened))
	}
	tb.Node.NodePortAddresses = []netip.Addr{netip.MustParseAddr("172.26.236.178")}
	mustSync(t, p, tb, false)
	if len(opened) != 2 || !opened[0].closed || len(opened[1].held) != 1 {
		t.Fatalf("after the address changed: %d opened (first closed: %v), want 2, the second holding a's NodePort", len(opened), opened[0].closed)
	}
}

// TestExternalAdopts: what an earlier tc load balancer left (pinned) and
// the table still wants costs no map change; what it no longer wants is
// deleted.
func TestExternalAdopts(t *testing.T) {
	p, _, _ := newTestPlane(t)
	ext := &fakeExt{held: map[key]string{}, left: []tclb.Held{
		{Frontend: ap("172.26.236.177:30001"), Protocol: model.ProtocolTCP,
			Backends: []tclb.Backend{{AddrPort: ap("192.168.1.2:8080"), Local: true}}},
		{Frontend: ap("172.26.236.177:30009"), Protocol: model.ProtocolTCP,
			Backends: []tclb.Backend{{AddrPort: ap("192.168.1.9:8080"), Local: true}}},
	}}
	p.SetExternal(func(servicetable.NodeConfig) (ExternalLB, error) { return ext, nil })
	a := nodePortPort("default/a:80/tcp", "10.96.0.1:80", 30001, ep("192.168.1.2:8080", true))
	mustSync(t, p, table(a), false)
	if ext.calls != 1 {
		t.Errorf("sync after adopting: %d tc calls, want 1 (the delete of 30009 only)", ext.calls)
	}
}

// TestExternalMaglev: the maglev scheduler (the port's annotation, or the
// plane's) puts the external frontends under Maglev; the socket load
// balancer chooses at random for them.
func TestExternalMaglev(t *testing.T) {
	for _, tc := range []struct {
		name        string
		port, plane socklb.Scheduler
		maglev      bool
	}{{"annotation", Maglev, "", true}, {"plane default", "", Maglev, true}, {"annotation over plane", "rr", Maglev, false}, {"none", "", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			p, lb, _ := newTestPlane(t)
			p.SetScheduler(tc.plane)
			ext := &fakeExt{held: map[key]string{}}
			p.SetExternal(func(servicetable.NodeConfig) (ExternalLB, error) { return ext, nil })
			a := nodePortPort("default/a:80/tcp", "10.96.0.1:80", 30001, ep("192.168.1.2:8080", true))
			a.Scheduler = string(tc.port)
			mustSync(t, p, table(a), false)
			got := ext.list()
			if len(got) != 1 || strings.HasSuffix(got[0], " maglev") != tc.maglev {
				t.Errorf("tc load balancer holds %q, want Maglev %v", got, tc.maglev)
			}
			for k, pol := range lb.policy {
				if want := socklb.Scheduler(tc.port); (want == "" || want == Maglev) && pol.Scheduler != socklb.Random && tc.plane != "rr" {
					t.Errorf("socket load balancer %v: scheduler %q, want random", k, pol.Scheduler)
				}
			}
		})
	}
}
