package alloc

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

type allocCase struct {
	name     string
	pools    []Pool
	svcs     []Service
	assigned map[string]string
	pending  map[string]pend
}

func runCases(t *testing.T, cases []allocCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check(t, Allocate(tc.pools, tc.svcs), tc.assigned, tc.pending)
		})
	}
}

func TestAllocatePools(t *testing.T) {
	runCases(t, []allocCase{{
		name:  "cidr uses every address, then exhausted",
		pools: []Pool{l2("lab", "172.26.236.180/30")},
		svcs:  []Service{svc("e", 5), svc("a", 1), svc("c", 3), svc("b", 2), svc("d", 4)},
		assigned: map[string]string{
			"default/a": "lab 172.26.236.180", "default/b": "lab 172.26.236.181",
			"default/c": "lab 172.26.236.182", "default/d": "lab 172.26.236.183",
		},
		pending: map[string]pend{"default/e": {ErrPoolExhausted, "pool lab has no free IPv4 address"}},
	}, {
		name:     "range and several ranges, lowest first",
		pools:    []Pool{l2("lab", "172.26.236.190-172.26.236.199", "172.26.236.180-172.26.236.180")},
		svcs:     []Service{svc("a", 1), svc("b", 2)},
		assigned: map[string]string{"default/a": "lab 172.26.236.180", "default/b": "lab 172.26.236.190"},
	}, {
		name: "priority: lowest non-zero first, 0 last, ties by name",
		pools: []Pool{
			l2("a-unset", "10.0.0.1"),
			with(l2("b-two", "10.0.1.1"), func(p *Pool) { p.Priority = 2 }),
			with(l2("c-one", "10.0.2.1"), func(p *Pool) { p.Priority = 1 }),
			with(l2("d-one", "10.0.3.1"), func(p *Pool) { p.Priority = 1 }),
		},
		svcs: []Service{svc("s1", 1), svc("s2", 2), svc("s3", 3), svc("s4", 4), svc("s5", 5)},
		assigned: map[string]string{
			"default/s1": "c-one 10.0.2.1", "default/s2": "d-one 10.0.3.1",
			"default/s3": "b-two 10.0.1.1", "default/s4": "a-unset 10.0.0.1",
		},
		pending: map[string]pend{"default/s5": {ErrPoolExhausted, "pool b-two has no free IPv4 address; pool a-unset"}},
	}, {
		name: "autoAssign false: only on request of the pool or one of its IPs",
		pools: []Pool{
			with(l2("manual", "10.0.0.1-10.0.0.9"), func(p *Pool) { p.AutoAssign = false }),
		},
		svcs: []Service{
			svc("auto", 1),
			sv(svc("bypool", 2), func(s *Service) { s.RequestedPool = "manual" }),
			sv(svc("byip", 3), func(s *Service) { s.RequestedIPs = ips("10.0.0.5") }),
		},
		assigned: map[string]string{"default/bypool": "manual 10.0.0.1", "default/byip": "manual 10.0.0.5"},
		pending:  map[string]pend{"default/auto": {ErrNoPool, "no auto-assign IPAddressPool allows default/auto"}},
	}, {
		name:    "no pools at all",
		svcs:    []Service{svc("a", 1)},
		pending: map[string]pend{"default/a": {ErrNoPool, "allows default/a"}},
	}})
}

func TestAllocateLimits(t *testing.T) {
	teamA := func(p *Pool) { p.Namespaces = []string{"team-a"} }
	east := func(p *Pool) { p.NamespaceSelectors = []labels.Selector{sel("zone=east")} }
	premium := func(p *Pool) { p.ServiceSelectors = []labels.Selector{sel("tier=premium"), sel("tier in (gold)")} }
	runCases(t, []allocCase{{
		name:     "namespace list",
		pools:    []Pool{with(l2("a", "10.0.0.1-10.0.0.9"), teamA)},
		svcs:     []Service{svc("team-a/x", 1), svc("team-b/y", 2)},
		assigned: map[string]string{"team-a/x": "a 10.0.0.1"},
		pending:  map[string]pend{"team-b/y": {ErrNoPool, "no auto-assign IPAddressPool allows team-b/y"}},
	}, {
		name:  "namespace selector",
		pools: []Pool{with(l2("a", "10.0.0.1-10.0.0.9"), east)},
		svcs: []Service{
			sv(svc("n1/x", 1), func(s *Service) { s.NamespaceLabels = map[string]string{"zone": "east"} }),
			sv(svc("n2/y", 2), func(s *Service) { s.NamespaceLabels = map[string]string{"zone": "west"} }),
		},
		assigned: map[string]string{"n1/x": "a 10.0.0.1"},
		pending:  map[string]pend{"n2/y": {ErrNoPool, "n2/y"}},
	}, {
		name:  "service selectors: any one matches",
		pools: []Pool{with(l2("a", "10.0.0.1-10.0.0.9"), premium), l2("z-cheap", "10.9.0.1")},
		svcs: []Service{
			sv(svc("p", 1), func(s *Service) { s.Labels = map[string]string{"tier": "premium"} }),
			sv(svc("g", 2), func(s *Service) { s.Labels = map[string]string{"tier": "gold"} }),
			svc("plain", 3),
		},
		assigned: map[string]string{"default/p": "a 10.0.0.1", "default/g": "a 10.0.0.2", "default/plain": "z-cheap 10.9.0.1"},
	}, {
		name:  "every given constraint must match",
		pools: []Pool{with(with(l2("a", "10.0.0.1-10.0.0.9"), teamA), premium)},
		svcs: []Service{
			sv(svc("team-a/both", 1), func(s *Service) { s.Labels = map[string]string{"tier": "premium"} }),
			svc("team-a/nslabel", 2),
			sv(svc("team-b/svclabel", 3), func(s *Service) { s.Labels = map[string]string{"tier": "premium"} }),
		},
		assigned: map[string]string{"team-a/both": "a 10.0.0.1"},
		pending: map[string]pend{
			"team-a/nslabel":  {ErrNoPool, "team-a/nslabel"},
			"team-b/svclabel": {ErrNoPool, "team-b/svclabel"},
		},
	}, {
		name:  "a requested pool must allow the Service",
		pools: []Pool{with(l2("a", "10.0.0.1-10.0.0.9"), teamA)},
		svcs:  []Service{sv(svc("team-b/y", 1), func(s *Service) { s.RequestedPool = "a" })},
		pending: map[string]pend{"team-b/y": {ErrNoPool,
			"requested pool a does not allow team-b/y"}},
	}})
}

func TestAllocateRequests(t *testing.T) {
	pools := []Pool{
		l2("lab", "172.26.236.180-172.26.236.189"),
		with(l2("other", "172.26.236.190-172.26.236.199"), func(p *Pool) { p.Namespaces = []string{"other"} }),
		l2("v6", "fd00::1-fd00::9"),
	}
	runCases(t, []allocCase{{
		name:  "requested IP",
		pools: pools,
		svcs: []Service{
			sv(svc("a", 1), func(s *Service) { s.RequestedIPs = ips("172.26.236.185") }),
			svc("b", 2),
		},
		assigned: map[string]string{"default/a": "lab 172.26.236.185", "default/b": "lab 172.26.236.180"},
	}, {
		name:  "requested IP outside every pool",
		pools: pools,
		svcs:  []Service{sv(svc("a", 1), func(s *Service) { s.RequestedIPs = ips("10.1.2.3") })},
		pending: map[string]pend{"default/a": {ErrNotInPool,
			"requested IP 10.1.2.3 is in no IPAddressPool"}},
	}, {
		name:  "requested IP in a pool that does not allow the Service",
		pools: pools,
		svcs:  []Service{sv(svc("a", 1), func(s *Service) { s.RequestedIPs = ips("172.26.236.195") })},
		pending: map[string]pend{"default/a": {ErrNotInPool,
			"requested IP 172.26.236.195 is in pool other, which does not allow default/a"}},
	}, {
		name:  "requested IP and a pool that does not hold it",
		pools: pools,
		svcs: []Service{sv(svc("a", 1), func(s *Service) {
			s.RequestedIPs = ips("172.26.236.185")
			s.RequestedPool = "v6"
		})},
		pending: map[string]pend{"default/a": {ErrNotInPool, "requested IP 172.26.236.185 is not in pool v6"}},
	}, {
		name:  "requested IPs of two pools",
		pools: pools,
		svcs: []Service{sv(svc("a", 1), func(s *Service) {
			s.Families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
			s.RequestedIPs = ips("172.26.236.185", "fd00::5")
		})},
		pending: map[string]pend{"default/a": {ErrNotInPool,
			"one pool, but 172.26.236.185 in pool lab, fd00::5 in pool v6"}},
	}, {
		name:  "two requested IPs of one family",
		pools: pools,
		svcs: []Service{sv(svc("a", 1), func(s *Service) {
			s.RequestedIPs = ips("172.26.236.185", "172.26.236.186")
		})},
		pending: map[string]pend{"default/a": {ErrInvalidRequest, "requested IPs 172.26.236.185,172.26.236.186"}},
	}, {
		name:  "requested pool",
		pools: pools,
		svcs: []Service{sv(svc("a", 1), func(s *Service) {
			s.Families = []ipfamily.Family{ipfamily.IPv6}
			s.RequestedPool = "v6"
		})},
		assigned: map[string]string{"default/a": "v6 fd00::1"},
	}, {
		name:    "requested pool unknown",
		pools:   pools,
		svcs:    []Service{sv(svc("a", 1), func(s *Service) { s.RequestedPool = "nope" })},
		pending: map[string]pend{"default/a": {ErrNoPool, "requested pool nope does not exist"}},
	}, {
		name:  "requested IP in use by a Service that does not share",
		pools: pools,
		svcs: []Service{
			sv(svc("a", 1), func(s *Service) { s.RequestedIPs = ips("172.26.236.185") }),
			sv(svc("b", 2), func(s *Service) { s.RequestedIPs = ips("172.26.236.185"); s.Ports = tcp(443) }),
		},
		assigned: map[string]string{"default/a": "lab 172.26.236.185"},
		pending: map[string]pend{"default/b": {ErrIPInUse,
			"172.26.236.185 is in use by default/a, which does not share it: it has no sharing key"}},
	}})
}

func TestAllocateSharing(t *testing.T) {
	pools := []Pool{l2("lab", "172.26.236.180-172.26.236.189")}
	key := func(k string, ports ...int32) func(*Service) {
		return func(s *Service) { s.SharingKey = k; s.Ports = tcp(ports...) }
	}
	runCases(t, []allocCase{{
		name:  "same key, other ports: share, also without asking for the IP",
		pools: pools,
		svcs: []Service{
			svc("first", 0),
			sv(svc("a", 1), key("k", 80)),
			sv(svc("b", 2), key("k", 443)),
			sv(svc("c", 3), func(s *Service) {
				key("k", 53)(s)
				s.Ports = []Port{{model.ProtocolUDP, 53}}
				s.RequestedIPs = ips("172.26.236.181")
			}),
		},
		assigned: map[string]string{
			"default/first": "lab 172.26.236.180",
			"default/a":     "lab 172.26.236.181", "default/b": "lab 172.26.236.181", "default/c": "lab 172.26.236.181",
		},
	}, {
		name:  "key mismatch",
		pools: pools,
		svcs: []Service{
			sv(svc("a", 1), key("k", 80)),
			sv(svc("b", 2), func(s *Service) { key("j", 443)(s); s.RequestedIPs = ips("172.26.236.180") }),
			sv(svc("c", 3), key("j", 443)),
		},
		assigned: map[string]string{"default/a": "lab 172.26.236.180", "default/c": "lab 172.26.236.181"},
		pending: map[string]pend{"default/b": {ErrIPInUse,
			`172.26.236.180 is in use by default/a, which does not share it: its sharing key "k" differs from "j"`}},
	}, {
		name:  "port clash",
		pools: pools,
		svcs: []Service{
			sv(svc("a", 1), key("k", 80, 443)),
			sv(svc("b", 2), func(s *Service) { key("k", 443)(s); s.RequestedIPs = ips("172.26.236.180") }),
			sv(svc("c", 3), key("k", 443)),
		},
		assigned: map[string]string{"default/a": "lab 172.26.236.180", "default/c": "lab 172.26.236.181"},
		pending:  map[string]pend{"default/b": {ErrPortClash, "172.26.236.180 TCP/443 is in use by default/a"}},
	}, {
		name:  "Local needs the same selector",
		pools: pools,
		svcs: []Service{
			sv(svc("a", 1), func(s *Service) {
				key("k", 80)(s)
				s.TrafficPolicyLocal = true
				s.Selector = map[string]string{"app": "x"}
			}),
			sv(svc("same", 2), func(s *Service) {
				key("k", 443)(s)
				s.Selector = map[string]string{"app": "x"}
				s.RequestedIPs = ips("172.26.236.180")
			}),
			sv(svc("other", 3), func(s *Service) {
				key("k", 8080)(s)
				s.Selector = map[string]string{"app": "y"}
				s.RequestedIPs = ips("172.26.236.180")
			}),
		},
		assigned: map[string]string{"default/a": "lab 172.26.236.180", "default/same": "lab 172.26.236.180"},
		pending: map[string]pend{"default/other": {ErrIPInUse,
			"in use by default/a, which does not share it: externalTrafficPolicy Local needs both to have the same selector"}},
	}, {
		name:  "this Service has no key",
		pools: pools,
		svcs: []Service{
			sv(svc("a", 1), key("k", 80)),
			sv(svc("b", 2), func(s *Service) { s.Ports = tcp(443); s.RequestedIPs = ips("172.26.236.180") }),
		},
		assigned: map[string]string{"default/a": "lab 172.26.236.180"},
		pending:  map[string]pend{"default/b": {ErrIPInUse, "this Service has no sharing key"}},
	}})
}

func TestAllocateNodeIP(t *testing.T) {
	nodes := Pool{Name: "nodes", AutoAssign: true, Mode: ModeNodeIP}
	v6 := func(s *Service) { s.Families = []ipfamily.Family{ipfamily.IPv6} }
	runCases(t, []allocCase{{
		name:  "clashing ports on the node addresses",
		pools: []Pool{nodes},
		svcs: []Service{
			svc("a", 1),
			svc("b", 2),
			sv(svc("c", 3), func(s *Service) { s.Ports = tcp(443) }),
			sv(svc("d", 4), v6),
			sv(svc("e", 5), func(s *Service) { s.Ports = []Port{{model.ProtocolUDP, 80}} }),
		},
		assigned: map[string]string{
			"default/a": "nodes node-ip", "default/c": "nodes node-ip",
			"default/d": "nodes node-ip", "default/e": "nodes node-ip",
		},
		pending: map[string]pend{"default/b": {ErrPortClash, "pool nodes: TCP/80 on the nodes' IPv4 addresses is in use by default/a"}},
	}, {
		name:     "a clash with an older one falls through to the next pool",
		pools:    []Pool{with(nodes, func(p *Pool) { p.Priority = 1 }), l2("lab", "10.0.0.1")},
		svcs:     []Service{svc("a", 1), svc("b", 2)},
		assigned: map[string]string{"default/a": "nodes node-ip", "default/b": "lab 10.0.0.1"},
	}, {
		name:  "no IP can be requested",
		pools: []Pool{nodes},
		svcs: []Service{sv(svc("a", 1), func(s *Service) {
			s.RequestedPool = "nodes"
			s.RequestedIPs = ips("10.0.0.1")
		})},
		pending: map[string]pend{"default/a": {ErrNotInPool, "pool nodes is in node-ip mode and has no addresses"}},
	}})
}

func TestAllocateDualStack(t *testing.T) {
	dual := func(s *Service) { s.Families = []ipfamily.Family{ipfamily.IPv6, ipfamily.IPv4} }
	prefer := func(s *Service) { dual(s); s.PreferDualStack = true }
	runCases(t, []allocCase{{
		name:     "both families from one pool",
		pools:    []Pool{l2("lab", "172.26.236.180-172.26.236.181", "fd00::10-fd00::11")},
		svcs:     []Service{sv(svc("a", 1), dual)},
		assigned: map[string]string{"default/a": "lab 172.26.236.180,fd00::10"},
	}, {
		name: "required dual-stack skips a pool with one family",
		pools: []Pool{
			with(l2("a-v4", "10.0.0.1"), func(p *Pool) { p.Priority = 1 }),
			l2("b-dual", "10.0.1.1", "fd00::1"),
		},
		svcs:     []Service{sv(svc("a", 1), dual)},
		assigned: map[string]string{"default/a": "b-dual 10.0.1.1,fd00::1"},
	}, {
		name: "prefer dual-stack takes one family",
		pools: []Pool{
			l2("v6", "fd00::1"),
		},
		svcs: []Service{
			sv(svc("a", 1), func(s *Service) { prefer(s); s.Families = []ipfamily.Family{ipfamily.IPv6, ipfamily.IPv4} }),
			sv(svc("b", 2), func(s *Service) { prefer(s); s.Families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} }),
		},
		assigned: map[string]string{"default/a": "v6 fd00::1"},
		pending:  map[string]pend{"default/b": {ErrNoPool, "pool v6 has no IPv4 range"}},
	}, {
		name:    "require dual-stack fails on a one-family pool",
		pools:   []Pool{l2("lab", "172.26.236.180")},
		svcs:    []Service{sv(svc("a", 1), dual)},
		pending: map[string]pend{"default/a": {ErrNoPool, "pool lab has no IPv6 range"}},
	}, {
		name:  "require dual-stack fails when one family is exhausted",
		pools: []Pool{l2("lab", "172.26.236.180-172.26.236.181", "fd00::1")},
		svcs:  []Service{sv(svc("a", 1), dual), sv(svc("b", 2), dual), sv(svc("c", 3), func(s *Service) {})},
		assigned: map[string]string{
			"default/a": "lab 172.26.236.180,fd00::1",
			"default/c": "lab 172.26.236.181", // b held nothing
		},
		pending: map[string]pend{"default/b": {ErrPoolExhausted, "pool lab has no free IPv6 address"}},
	}, {
		name:  "requested IP of one family, the other from its pool",
		pools: []Pool{l2("a", "10.0.0.1-10.0.0.5", "fd00::1-fd00::5"), l2("b", "fd00:1::1")},
		svcs: []Service{sv(svc("a", 1), func(s *Service) {
			dual(s)
			s.RequestedIPs = ips("10.0.0.3")
		})},
		assigned: map[string]string{"default/a": "a 10.0.0.3,fd00::1"},
	}})
}
