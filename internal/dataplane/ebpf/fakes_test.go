package ebpf

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// fakeLB tracks what a socket load balancer's maps hold; failAt makes the
// call of that number (1-based, over SetService and DeleteService) fail.
type fakeLB struct {
	mu      sync.Mutex // Reap runs on the plane's reaper goroutine
	held    map[key][]netip.AddrPort
	policy  map[key]socklb.Policy
	calls   int
	failAt  int
	reaps   int
	retired int // replaced or deleted sets not reaped yet
	closed  bool
}

func newFakeLB() *fakeLB {
	return &fakeLB{held: map[key][]netip.AddrPort{}, policy: map[key]socklb.Policy{}}
}

func (f *fakeLB) call() error {
	f.calls++
	if f.calls == f.failAt {
		return fmt.Errorf("fake: call %d fails", f.calls)
	}
	return nil
}

func (f *fakeLB) SetServicePolicy(fe netip.AddrPort, p model.Protocol, bes []netip.AddrPort, pol socklb.Policy) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil {
		return err
	}
	if _, had := f.held[key{fe, p}]; had {
		f.retired++
	}
	f.held[key{fe, p}] = slices.Clone(bes)
	f.policy[key{fe, p}] = pol
	return nil
}

func (f *fakeLB) DeleteService(fe netip.AddrPort, p model.Protocol) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil {
		return err
	}
	if _, had := f.held[key{fe, p}]; had {
		f.retired++
	}
	delete(f.held, key{fe, p})
	delete(f.policy, key{fe, p})
	return nil
}

func (f *fakeLB) Reap() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reaps++
	f.retired = 0
	return nil
}

func (f *fakeLB) Held() ([]socklb.Held, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []socklb.Held
	for k, bes := range f.held {
		out = append(out, socklb.Held{Frontend: k.Frontend, Protocol: k.Protocol, Backends: slices.Clone(bes), Policy: f.policy[k]})
	}
	return out, nil
}

func (f *fakeLB) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// unreaped returns the sets not reaped yet once the plane's reaper is idle
// (bounded wait).
func (f *fakeLB) unreaped() int {
	for range 100 {
		f.mu.Lock()
		n := f.retired
		f.mu.Unlock()
		if n == 0 {
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retired
}

// fakeRules stands for the nftables plane: it counts syncs and fails when
// told to.
type fakeRules struct {
	syncs, full int
	fail        error
}

func (r *fakeRules) Name() string                  { return "rules" }
func (r *fakeRules) Probe(context.Context) error   { return r.fail }
func (r *fakeRules) Cleanup(context.Context) error { return nil }
func (r *fakeRules) Changed(context.Context) (bool, error) {
	return false, nil
}

func (r *fakeRules) Sync(_ context.Context, _ *servicetable.Table, full bool) (dataplane.Stats, error) {
	if r.fail != nil {
		return dataplane.Stats{}, r.fail
	}
	r.syncs++
	if full {
		r.full++
	}
	return dataplane.Stats{Full: full, Ops: map[ipfamily.Family]int{ipfamily.IPv4: 1}}, nil
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func ep(addrPort string, local bool) servicetable.Endpoint {
	a := ap(addrPort)
	return servicetable.Endpoint{Addr: a.Addr(), Port: a.Port(), Local: local, Ready: true, Serving: true}
}

// clusterIPPort is a TCP ClusterIP Service port with endpoints eps, all
// ready, under the Cluster policy.
func clusterIPPort(id, vip string, eps ...servicetable.Endpoint) *servicetable.ServicePort {
	v := ap(vip)
	return &servicetable.ServicePort{
		ID: id, Family: ipfamily.Of(v.Addr()), Protocol: model.ProtocolTCP, Port: v.Port(), ClusterIP: v.Addr(),
		Frontends:        []servicetable.Frontend{{Kind: servicetable.FrontendClusterIP, Addr: v.Addr(), Port: v.Port()}},
		ClusterEndpoints: eps, HasEndpoints: len(eps) > 0, AllEndpoints: eps,
	}
}
