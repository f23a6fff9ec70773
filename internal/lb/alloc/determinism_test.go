package alloc

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// randomWorld builds pools and Services that exercise every rule: priorities,
// limits, sharing, requests, node-ip mode, dual-stack, clashing current IPs.
func randomWorld(r *rand.Rand) ([]Pool, []Service) {
	pools := []Pool{
		l2("lab", "172.26.236.180-172.26.236.189", "fd00::1-fd00::4"),
		with(l2("hi", "10.0.0.1-10.0.0.3"), func(p *Pool) { p.Priority = 1 }),
		with(l2("team", "10.1.0.1-10.1.0.5"), func(p *Pool) { p.Namespaces = []string{"team"}; p.Priority = 2 }),
		with(l2("manual", "10.2.0.1-10.2.0.5"), func(p *Pool) { p.AutoAssign = false }),
		{Name: "nodes", Mode: ModeNodeIP, Priority: 3, AutoAssign: true, ServiceSelectors: []labels.Selector{sel("mode=node")}},
	}
	var svcs []Service
	for i := range 40 {
		ns := []string{"default", "team"}[r.IntN(2)]
		s := svc(fmt.Sprintf("%s/s%02d", ns, i), r.IntN(10)) // many equal creation times
		s.Ports = tcp(int32(80 + r.IntN(3)))
		switch r.IntN(8) {
		case 0:
			s.SharingKey = "k"
		case 1:
			s.Labels = map[string]string{"mode": "node"}
		case 2:
			s.RequestedPool = []string{"manual", "lab", "nope"}[r.IntN(3)]
		case 3:
			s.RequestedIPs = ips(fmt.Sprintf("172.26.236.%d", 180+r.IntN(12)))
		case 4:
			s.Families = []ipfamily.Family{ipfamily.IPv6, ipfamily.IPv4}
			s.PreferDualStack = r.IntN(2) == 0
		}
		if r.IntN(3) == 0 {
			s.Current = []netip.Addr{netip.AddrFrom4([4]byte{172, 26, 236, byte(180 + r.IntN(12))})}
		}
		svcs = append(svcs, s)
	}
	return pools, svcs
}

type outcome struct {
	Assigned map[model.ServiceKey]Assignment
	Pending  map[model.ServiceKey]string
}

func outcomeOf(res Result) outcome {
	o := outcome{Assigned: res.Assigned, Pending: map[model.ServiceKey]string{}}
	for k, err := range res.Pending {
		o.Pending[k] = err.Error()
	}
	return o
}

func TestAllocateDeterministic(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		pools, svcs := randomWorld(r)
		want := outcomeOf(Allocate(pools, svcs))
		if len(want.Assigned)+len(want.Pending) != len(svcs) {
			t.Fatalf("seed %d: %d results for %d Services", seed, len(want.Assigned)+len(want.Pending), len(svcs))
		}
		for shuffle := range 5 {
			r.Shuffle(len(pools), func(i, j int) { pools[i], pools[j] = pools[j], pools[i] })
			r.Shuffle(len(svcs), func(i, j int) { svcs[i], svcs[j] = svcs[j], svcs[i] })
			got := outcomeOf(Allocate(pools, svcs))
			if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Fatalf("seed %d shuffle %d: result differs (-first +shuffled):\n%s", seed, shuffle, d)
			}
		}
		// No address is held by two Services that may not share it.
		holders := map[netip.Addr][]model.ServiceKey{}
		for k, a := range want.Assigned {
			for _, ip := range a.IPs {
				holders[ip] = append(holders[ip], k)
			}
		}
		for ip, ks := range holders {
			for _, k := range ks {
				if len(ks) > 1 && findSvc(svcs, k).SharingKey == "" {
					t.Errorf("seed %d: %s held by %v, and %s does not share", seed, ip, ks, k)
				}
			}
		}
	}
}

func findSvc(svcs []Service, k model.ServiceKey) Service {
	for _, s := range svcs {
		if s.Key == k {
			return s
		}
	}
	return Service{}
}
