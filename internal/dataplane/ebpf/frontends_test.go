package ebpf

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

func TestSocketEntries(t *testing.T) {
	local, remote := ep("192.168.1.5:8080", true), ep("192.168.2.7:8080", false)
	vip, lbIP, node := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("172.26.237.1"), netip.MustParseAddr("172.26.236.2")
	fes := []servicetable.Frontend{
		{Kind: servicetable.FrontendClusterIP, Addr: vip, Port: 80},
		{Kind: servicetable.FrontendLoadBalancer, Addr: lbIP, Port: 80},
		{Kind: servicetable.FrontendNodePort, Addr: node, Port: 30080},
	}
	both := []netip.AddrPort{ap("192.168.1.5:8080"), ap("192.168.2.7:8080")}
	all := func(bes []netip.AddrPort) []entry {
		return []entry{
			{Frontend: ap("10.96.0.10:80"), Protocol: model.ProtocolTCP, Backends: bes},
			{Frontend: ap("172.26.237.1:80"), Protocol: model.ProtocolTCP, Backends: bes},
			{Frontend: ap("172.26.236.2:30080"), Protocol: model.ProtocolTCP, Backends: bes},
		}
	}
	base := func(mod func(*servicetable.ServicePort)) *servicetable.ServicePort {
		sp := &servicetable.ServicePort{ID: "default/web:80/tcp", Protocol: model.ProtocolTCP, Port: 80, NodePort: 30080,
			ClusterIP: vip, LoadBalancerIPs: []netip.Addr{lbIP}, Frontends: fes, HasEndpoints: true,
			ClusterEndpoints: []servicetable.Endpoint{local, remote}, AllEndpoints: []servicetable.Endpoint{local, remote}}
		mod(sp)
		return sp
	}
	for _, tc := range []struct {
		name    string
		sp      *servicetable.ServicePort
		entries []entry
		left    []leftOut
	}{{
		name:    "every frontend goes to the cluster's endpoints",
		sp:      base(func(*servicetable.ServicePort) {}),
		entries: all(both),
	}, {
		name: "no endpoint anywhere: every connect refused",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.HasEndpoints, sp.ClusterEndpoints, sp.AllEndpoints = false, nil, nil
		}),
		entries: all(nil),
	}, {
		name: "internal policy Local: the ClusterIP goes to local endpoints, the rest to the cluster's",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.InternalPolicyLocal, sp.LocalEndpoints = true, []servicetable.Endpoint{local}
		}),
		entries: func() []entry {
			es := all(both)
			es[0].Backends = []netip.AddrPort{ap("192.168.1.5:8080")}
			return es
		}(),
	}, {
		name: "internal policy Local without a local endpoint: the ClusterIP drops, left to the rules",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.InternalPolicyLocal = true
		}),
		entries: all(both)[1:],
		left:    []leftOut{{fes[0], leftDrop}},
	}, {
		name: "external policy Local: connects on the node short-circuit to the cluster's endpoints",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.ExternalPolicyLocal, sp.LocalEndpoints = true, []servicetable.Endpoint{local}
		}),
		entries: all(both),
	}, {
		name: "ClientIP affinity: every frontend with its timeout",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.AffinityTimeout = 3 * time.Hour
		}),
		entries: func() []entry {
			es := all(both)
			for i := range es {
				es[i].Policy.Affinity = 3 * time.Hour
			}
			return es
		}(),
	}, {
		name: "source ranges: the LB IP left to the firewall",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.SourceRanges = []netip.Prefix{netip.MustParsePrefix("172.26.236.0/24")}
		}),
		entries: []entry{all(both)[0], all(both)[2]},
		left:    []leftOut{{fes[1], leftSourceRanges}},
	}, {
		name: "SCTP: left to the rules",
		sp: base(func(sp *servicetable.ServicePort) {
			sp.Protocol = model.ProtocolSCTP
		}),
		left: []leftOut{{fes[0], leftSCTP}, {fes[1], leftSCTP}, {fes[2], leftSCTP}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			entries, left := socketEntries(tc.sp)
			if !reflect.DeepEqual(entries, tc.entries) {
				t.Errorf("entries:\n got %v\nwant %v", entries, tc.entries)
			}
			if !reflect.DeepEqual(left, tc.left) {
				t.Errorf("left:\n got %v\nwant %v", left, tc.left)
			}
			checkSocketFor(t, tc.sp, tc.entries, tc.left)
		})
	}
}

// checkSocketFor: SocketFor answers for one frontend what socketEntries
// says of it, and nothing for an address that is no frontend of the port.
func checkSocketFor(t *testing.T, sp *servicetable.ServicePort, entries []entry, left []leftOut) {
	t.Helper()
	for _, e := range entries {
		s, ok := SocketFor(sp, e.Frontend)
		if !ok || !s.Held || !reflect.DeepEqual(s.Backends, e.Backends) || s.Left != "" {
			t.Errorf("SocketFor(%v) = %+v, %v; want held with %v", e.Frontend, s, ok, e.Backends)
		}
	}
	for _, l := range left {
		fe := netip.AddrPortFrom(l.Frontend.Addr, l.Frontend.Port)
		if s, ok := SocketFor(sp, fe); !ok || s.Held || s.Left != l.Reason {
			t.Errorf("SocketFor(%v) = %+v, %v; want left: %s", fe, s, ok, l.Reason)
		}
	}
	if s, ok := SocketFor(sp, ap("10.96.0.10:81")); ok {
		t.Errorf("SocketFor(10.96.0.10:81), no frontend of the port = %+v, want none", s)
	}
}
