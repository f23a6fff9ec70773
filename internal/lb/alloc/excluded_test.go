package alloc

import (
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

func v6only(s *Service) { s.Families = []ipfamily.Family{ipfamily.IPv6} }

// A pool's Excluded blocks (the cluster's own addresses that came to lie in it
// after it was admitted) are never newly handed out, but a Service holding one
// keeps it: only new allocations avoid them.
func TestAllocateExcluded(t *testing.T) {
	node3 := Reserved{Range: rng("172.26.236.181"), What: "Node node3's InternalIP 172.26.236.181"}
	podNet := Reserved{Range: rng("172.26.236.184/30"), What: "Node node4's podCIDR 172.26.236.184/30"}
	lab := with(l2("lab", "172.26.236.180-172.26.236.189"), func(p *Pool) { p.Excluded = []Reserved{node3, podNet} })
	current := func(ss ...string) func(*Service) { return func(s *Service) { s.Current = ips(ss...) } }
	runCases(t, []allocCase{{
		name:  "free addresses skip single addresses and whole blocks",
		pools: []Pool{lab},
		svcs:  []Service{svc("a", 1), svc("b", 2), svc("c", 3), svc("d", 4), svc("e", 5), svc("f", 6), svc("g", 7)},
		assigned: map[string]string{
			"default/a": "lab 172.26.236.180", "default/b": "lab 172.26.236.182",
			"default/c": "lab 172.26.236.183", "default/d": "lab 172.26.236.188",
			"default/e": "lab 172.26.236.189",
		},
		pending: map[string]pend{
			"default/f": {ErrPoolExhausted, "pool lab has no free IPv4 address"},
			"default/g": {ErrPoolExhausted, "pool lab has no free IPv4 address"},
		},
	}, {
		name:  "a Service holding an excluded address keeps it",
		pools: []Pool{lab},
		svcs:  []Service{sv(svc("holder", 1), current("172.26.236.181")), sv(svc("inblock", 2), current("172.26.236.186")), svc("new", 3)},
		assigned: map[string]string{
			"default/holder": "lab 172.26.236.181", "default/inblock": "lab 172.26.236.186",
			"default/new": "lab 172.26.236.180",
		},
	}, {
		name:  "a requested excluded address is refused, naming what it is",
		pools: []Pool{lab},
		svcs:  []Service{sv(svc("req", 1), func(s *Service) { s.RequestedIPs = ips("172.26.236.181") })},
		pending: map[string]pend{"default/req": {ErrReservedIP,
			"requested IP 172.26.236.181 is Node node3's InternalIP 172.26.236.181: pool lab does not hand it out"}},
	}, {
		name:  "a sharing Service does not join a kept excluded address",
		pools: []Pool{lab},
		svcs: []Service{
			sv(svc("holder", 1), func(s *Service) { current("172.26.236.181")(s); s.SharingKey = "k" }),
			sv(svc("joiner", 2), func(s *Service) { s.SharingKey = "k"; s.Ports = tcp(443) }),
		},
		assigned: map[string]string{"default/holder": "lab 172.26.236.181", "default/joiner": "lab 172.26.236.180"},
	}, {
		name: "a pool wholly excluded has nothing to give",
		pools: []Pool{with(l2("small", "10.0.0.0/30"), func(p *Pool) {
			p.Excluded = []Reserved{{Range: rng("10.0.0.0/24"), What: "the service CIDR 10.0.0.0/24"}}
		})},
		svcs:    []Service{svc("a", 1)},
		pending: map[string]pend{"default/a": {ErrPoolExhausted, "pool small has no free IPv4 address"}},
	}, {
		name: "IPv6: an excluded block at the end of the range",
		pools: []Pool{with(l2("v6", "fd00::1-fd00::4"), func(p *Pool) {
			p.Excluded = []Reserved{{Range: rng("fd00::2-fd00::ffff"), What: "Node n's podCIDR"}}
		})},
		svcs:     []Service{sv(svc("a", 1), v6only), sv(svc("b", 2), v6only)},
		assigned: map[string]string{"default/a": "v6 fd00::1"},
		pending:  map[string]pend{"default/b": {ErrPoolExhausted, "pool v6 has no free IPv6 address"}},
	}})
}
