package alloc

import (
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

func TestAllocateRestart(t *testing.T) {
	lab := l2("lab", "172.26.236.180-172.26.236.189")
	current := func(ss ...string) func(*Service) { return func(s *Service) { s.Current = ips(ss...) } }
	runCases(t, []allocCase{{
		name:  "valid current IPs are kept, even when a lower one is free",
		pools: []Pool{lab},
		svcs: []Service{
			svc("old", 1), // no current: gets the lowest free after the kept ones
			sv(svc("new", 2), current("172.26.236.180")),
			sv(svc("mid", 3), current("172.26.236.185")),
		},
		assigned: map[string]string{
			"default/old": "lab 172.26.236.181", "default/new": "lab 172.26.236.180",
			"default/mid": "lab 172.26.236.185",
		},
	}, {
		name:     "a current IP outside every pool is reallocated",
		pools:    []Pool{lab},
		svcs:     []Service{sv(svc("a", 1), current("10.9.9.9"))},
		assigned: map[string]string{"default/a": "lab 172.26.236.180"},
	}, {
		name:  "two holders of one IP without sharing: the older keeps it",
		pools: []Pool{lab},
		svcs: []Service{
			sv(svc("young", 2), current("172.26.236.183")),
			sv(svc("elder", 1), current("172.26.236.183")),
		},
		assigned: map[string]string{"default/elder": "lab 172.26.236.183", "default/young": "lab 172.26.236.180"},
	}, {
		name:  "same creation time: the key decides",
		pools: []Pool{lab},
		svcs: []Service{
			sv(svc("b", 1), current("172.26.236.183")),
			sv(svc("a", 1), current("172.26.236.183")),
		},
		assigned: map[string]string{"default/a": "lab 172.26.236.183", "default/b": "lab 172.26.236.180"},
	}, {
		name:  "a changed request moves the Service",
		pools: []Pool{lab, l2("other", "10.0.0.1-10.0.0.9")},
		svcs: []Service{
			sv(svc("ip", 1), func(s *Service) { current("172.26.236.183")(s); s.RequestedIPs = ips("172.26.236.184") }),
			sv(svc("pool", 2), func(s *Service) { current("172.26.236.185")(s); s.RequestedPool = "other" }),
		},
		assigned: map[string]string{"default/ip": "lab 172.26.236.184", "default/pool": "other 10.0.0.1"},
	}, {
		name: "kept in a pool that no longer auto-assigns",
		pools: []Pool{
			with(lab, func(p *Pool) { p.AutoAssign = false }),
			l2("other", "10.0.0.1-10.0.0.9"),
		},
		svcs:     []Service{sv(svc("a", 1), current("172.26.236.187")), svc("b", 2)},
		assigned: map[string]string{"default/a": "lab 172.26.236.187", "default/b": "other 10.0.0.1"},
	}, {
		name:     "not kept when the pool's limits no longer admit it",
		pools:    []Pool{with(lab, func(p *Pool) { p.Namespaces = []string{"x"} }), l2("other", "10.0.0.1")},
		svcs:     []Service{sv(svc("a", 1), current("172.26.236.187"))},
		assigned: map[string]string{"default/a": "other 10.0.0.1"},
	}, {
		name:  "prefer dual-stack with one current family gains the other",
		pools: []Pool{l2("lab", "172.26.236.180-172.26.236.189", "fd00::1")},
		svcs: []Service{sv(svc("a", 1), func(s *Service) {
			s.Families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
			s.PreferDualStack = true
			s.Current = ips("172.26.236.188")
		})},
		assigned: map[string]string{"default/a": "lab 172.26.236.188,fd00::1"},
	}, {
		name:  "require dual-stack with one current family is reallocated whole",
		pools: []Pool{l2("lab", "172.26.236.180-172.26.236.189", "fd00::1")},
		svcs: []Service{sv(svc("a", 1), func(s *Service) {
			s.Families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
			s.Current = ips("172.26.236.188")
		})},
		assigned: map[string]string{"default/a": "lab 172.26.236.180,fd00::1"},
	}, {
		name:  "shared current IPs stay shared",
		pools: []Pool{lab},
		svcs: []Service{
			sv(svc("a", 1), func(s *Service) { current("172.26.236.186")(s); s.SharingKey = "k" }),
			sv(svc("b", 2), func(s *Service) { current("172.26.236.186")(s); s.SharingKey = "k"; s.Ports = tcp(443) }),
		},
		assigned: map[string]string{"default/a": "lab 172.26.236.186", "default/b": "lab 172.26.236.186"},
	}})
}

// feedBack returns svcs with Current set from res, as the status writer would.
func feedBack(svcs []Service, res Result) []Service {
	out := make([]Service, len(svcs))
	for i, s := range svcs {
		s.Current = res.Assigned[s.Key].IPs
		out[i] = s
	}
	return out
}

func TestAllocateRelease(t *testing.T) {
	pools := []Pool{l2("lab", "172.26.236.180-172.26.236.181")}
	svcs := []Service{svc("a", 1), svc("b", 2), svc("c", 3)}
	first := Allocate(pools, svcs)
	check(t, first, map[string]string{"default/a": "lab 172.26.236.180", "default/b": "lab 172.26.236.181"},
		map[string]pend{"default/c": {ErrPoolExhausted, "pool lab"}})

	// a is deleted: its IP goes to c, and b stays where it was.
	second := Allocate(pools, feedBack(svcs[1:], first))
	check(t, second, map[string]string{"default/b": "lab 172.26.236.181", "default/c": "lab 172.26.236.180"}, nil)
}

func TestAllocateStable(t *testing.T) {
	pools := []Pool{
		l2("lab", "172.26.236.180-172.26.236.185", "fd00::1-fd00::3"),
		with(l2("hi", "10.0.0.1-10.0.0.2"), func(p *Pool) { p.Priority = 1 }),
	}
	svcs := []Service{
		svc("a", 1), svc("b", 2), svc("c", 3),
		sv(svc("d", 4), func(s *Service) { s.Families = []ipfamily.Family{ipfamily.IPv6, ipfamily.IPv4} }),
		sv(svc("e", 5), func(s *Service) { s.SharingKey = "k" }),
		sv(svc("f", 6), func(s *Service) { s.SharingKey = "k"; s.Ports = tcp(443) }),
	}
	first := Allocate(pools, svcs)
	if len(first.Pending) != 0 {
		t.Fatalf("pending: %v", first.Pending)
	}
	second := Allocate(pools, feedBack(svcs, first))
	want := map[string]string{}
	for k, a := range first.Assigned {
		want[k.String()] = describe(a)
	}
	check(t, second, want, nil)

	// A new, older Service with a higher-priority pool free does not displace
	// anything that is still valid.
	more := append(feedBack(svcs, first), svc("zero", 0))
	third := Allocate(pools, more)
	want["default/zero"] = "lab 172.26.236.183"
	check(t, third, want, nil)
}
