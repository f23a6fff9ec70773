package servicetable

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// entryIDs lists a table's entries as "ID family".
func entryIDs(tbl *Table) []string {
	var out []string
	for _, sp := range tbl.Ports {
		out = append(out, sp.ID+" "+sp.Family.String())
	}
	return out
}

// skipped lists a table's errors compactly, without the reason.
func skipped(tbl *Table) []string {
	var out []string
	for _, e := range tbl.Errors {
		s := e.Service.String()
		if e.Port != "" {
			s += " " + e.Port
		}
		if e.Family != 0 {
			s += " " + e.Family.String()
		}
		out = append(out, s)
	}
	return out
}

func nodePortSvc(name, clusterIP string, nodePort int32, mut ...func(*model.Service)) *model.Service {
	return svc(name, append([]func(*model.Service){
		withClusterIPs(clusterIP), withType(model.ServiceTypeNodePort, model.TrafficPolicyCluster),
		withPorts(model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 80, NodePort: nodePort}),
	}, mut...)...)
}

func withExternalIPs(a ...string) func(*model.Service) {
	return func(s *model.Service) { s.ExternalIPs = ips(a...) }
}

// TestBuildConflicts covers claims two Services cannot both have on a node:
// the loser's entry is skipped with a SkipError naming port and family, and
// every other entry survives.
func TestBuildConflicts(t *testing.T) {
	tests := []struct {
		name        string
		svcs        []*model.Service
		cfg         *NodeConfig
		wantEntries []string
		wantSkipped []string
		reason      string // in the first error
	}{{
		name: "same NodePort and protocol: the first by ID wins",
		svcs: []*model.Service{
			nodePortSvc("b", "10.96.0.2", 30080),
			nodePortSvc("a", "10.96.0.1", 30080),
			nodePortSvc("c", "10.96.0.3", 30081),
		},
		wantEntries: []string{"default/a:http/tcp IPv4", "default/c:http/tcp IPv4"},
		wantSkipped: []string{"default/b http/tcp IPv4"},
		reason:      "NodePort 172.26.236.177:30080/TCP already claimed as NodePort by default/a:http/tcp (IPv4)",
	}, {
		name: "same NodePort, other protocol: no conflict",
		svcs: []*model.Service{
			nodePortSvc("a", "10.96.0.1", 30053),
			nodePortSvc("b", "10.96.0.2", 30053, func(s *model.Service) { s.Ports[0].Protocol = model.ProtocolUDP }),
		},
		wantEntries: []string{"default/a:http/tcp IPv4", "default/b:http/udp IPv4"},
	}, {
		name: "same NodePort with no node-port address still conflicts (the node-wide claim)",
		svcs: []*model.Service{
			nodePortSvc("a", "fd00:96::1", 30080),
			nodePortSvc("b", "fd00:96::2", 30080),
		},
		cfg:         &NodeConfig{NodeName: "node1", NodePortAddresses: ips("172.26.236.177")},
		wantEntries: []string{"default/a:http/tcp IPv6"},
		wantSkipped: []string{"default/b http/tcp IPv6"},
		reason:      "NodePort 30080/TCP already claimed",
	}, {
		name: "same externalIP, port and protocol: the first by ID wins; the loser's other ports survive",
		svcs: []*model.Service{
			svc("b", withClusterIPs("10.96.0.2"), withExternalIPs("172.26.236.200"), withPorts(
				model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 80},
				model.ServicePort{Name: "https", Protocol: model.ProtocolTCP, Port: 443})),
			svc("a", withClusterIPs("10.96.0.1"), withExternalIPs("172.26.236.200")),
		},
		wantEntries: []string{"default/a:http/tcp IPv4", "default/b:https/tcp IPv4"},
		wantSkipped: []string{"default/b http/tcp IPv4"},
		reason:      "ExternalIP 172.26.236.200:80/TCP already claimed as ExternalIP by default/a:http/tcp (IPv4)",
	}, {
		name: "externalIP equal to an LB IP of another Service",
		svcs: []*model.Service{
			svc("a", withClusterIPs("10.96.0.1"), withType(model.ServiceTypeLoadBalancer, model.TrafficPolicyCluster), func(s *model.Service) {
				s.LoadBalancerIngress = []model.LoadBalancerIngress{{IP: ip("172.26.236.180"), IPMode: model.IPModeVIP}}
			}),
			svc("b", withClusterIPs("10.96.0.2"), withExternalIPs("172.26.236.180")),
		},
		wantEntries: []string{"default/a:http/tcp IPv4"},
		wantSkipped: []string{"default/b http/tcp IPv4"},
	}, {
		name: "an LB IP in Proxy mode is not captured, so it conflicts with nothing",
		svcs: []*model.Service{
			svc("a", withClusterIPs("10.96.0.1"), withType(model.ServiceTypeLoadBalancer, model.TrafficPolicyCluster), func(s *model.Service) {
				s.LoadBalancerIngress = []model.LoadBalancerIngress{{IP: ip("172.26.236.180"), IPMode: model.IPModeProxy}}
			}),
			svc("b", withClusterIPs("10.96.0.2"), withExternalIPs("172.26.236.180")),
		},
		wantEntries: []string{"default/a:http/tcp IPv4", "default/b:http/tcp IPv4"},
	}, {
		name: "an externalIP cannot take another Service's ClusterIP, even first by ID (CVE-2020-8554)",
		svcs: []*model.Service{
			svc("aaa-thief", withClusterIPs("10.96.0.1"), withExternalIPs("10.96.0.2")),
			svc("victim", withClusterIPs("10.96.0.2")),
		},
		wantEntries: []string{"default/victim:http/tcp IPv4"},
		wantSkipped: []string{"default/aaa-thief http/tcp IPv4"},
		reason:      "ExternalIP 10.96.0.2:80/TCP already claimed as ClusterIP by default/victim:http/tcp (IPv4)",
	}, {
		name: "an externalIP cannot take a node address and NodePort",
		svcs: []*model.Service{
			svc("aaa-thief", withClusterIPs("10.96.0.1"), withExternalIPs("172.26.236.177"), withPorts(
				model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 30080})),
			nodePortSvc("victim", "10.96.0.2", 30080),
		},
		wantEntries: []string{"default/victim:http/tcp IPv4"},
		wantSkipped: []string{"default/aaa-thief http/tcp IPv4"},
	}, {
		name: "health check node port equal to another Service's NodePort: every entry of the later Service",
		svcs: []*model.Service{
			svc("a", withClusterIPs("10.96.0.1", "fd00:96::1"), withType(model.ServiceTypeLoadBalancer, model.TrafficPolicyLocal), func(s *model.Service) {
				s.HealthCheckNodePort = 30080
				s.Ports = []model.ServicePort{
					{Name: "http", Protocol: model.ProtocolTCP, Port: 80, NodePort: 30001},
					{Name: "https", Protocol: model.ProtocolTCP, Port: 443, NodePort: 30002},
				}
			}),
			nodePortSvc("b", "10.96.0.2", 30080),
		},
		wantEntries: []string{"default/a:http/tcp IPv4", "default/a:http/tcp IPv6", "default/a:https/tcp IPv4", "default/a:https/tcp IPv6"},
		wantSkipped: []string{"default/b http/tcp IPv4"},
		reason:      "already claimed as HealthCheckNodePort by default/a:http/tcp (IPv4)",
	}, {
		name: "dual-stack: only the family with the conflict loses",
		svcs: []*model.Service{
			nodePortSvc("a", "10.96.0.1", 30080),
			nodePortSvc("b", "10.96.0.2", 30080, withClusterIPs("10.96.0.2", "fd00:96::2")),
		},
		wantEntries: []string{"default/a:http/tcp IPv4", "default/b:http/tcp IPv6"},
		wantSkipped: []string{"default/b http/tcp IPv4"},
	}, {
		name: "same ClusterIP and port: the first by ID wins",
		svcs: []*model.Service{
			svc("b", withClusterIPs("10.96.0.1")),
			svc("a", withClusterIPs("10.96.0.1")),
		},
		wantEntries: []string{"default/a:http/tcp IPv4"},
		wantSkipped: []string{"default/b http/tcp IPv4"},
	}, {
		name: "two ports of one Service on the same number and protocol",
		svcs: []*model.Service{svc("a", withPorts(
			model.ServicePort{Name: "web", Protocol: model.ProtocolTCP, Port: 80},
			model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 80}))},
		wantEntries: []string{"default/a:http/tcp IPv4"},
		wantSkipped: []string{"default/a web/tcp IPv4"},
	}, {
		name: "invalid Service skipped whole, beside a valid one",
		svcs: []*model.Service{
			svc("a", withClusterIPs("10.96.0.1"), withPorts(model.ServicePort{Name: "http", Protocol: model.ProtocolTCP})),
			svc("b", withClusterIPs("10.96.0.2")),
		},
		wantEntries: []string{"default/b:http/tcp IPv4"},
		wantSkipped: []string{"default/a"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testNode()
			if tc.cfg != nil {
				cfg = *tc.cfg
			}
			tbl := Build(snapshot(t, tc.svcs, nil), cfg)
			if d := cmp.Diff(tc.wantEntries, entryIDs(tbl)); d != "" {
				t.Errorf("entries (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantSkipped, skipped(tbl)); d != "" {
				t.Errorf("skipped (-want +got):\n%s", d)
			}
			if tc.reason != "" && (len(tbl.Errors) == 0 || !strings.Contains(tbl.Errors[0].Reason, tc.reason)) {
				t.Errorf("errors = %v, want the first to contain %q", tbl.Errors, tc.reason)
			}
			for _, e := range tbl.Errors {
				lost := strings.Contains(e.Reason, "already claimed") || strings.Contains(e.Reason, "duplicate entry")
				if e.Conflict != lost {
					t.Errorf("%v: Conflict = %v, want %v (set exactly for lost claims)", e, e.Conflict, lost)
				}
			}
		})
	}
}

// randomCluster makes n Services of assorted kinds with slices whose
// endpoints overlap, as a generator for order-independence tests.
func randomCluster(r *rand.Rand, n int) ([]*model.Service, []*model.EndpointSlice) {
	var svcs []*model.Service
	var sls []*model.EndpointSlice
	for i := range n {
		name := fmt.Sprintf("svc-%02d", i)
		s := svc(name, withClusterIPs(fmt.Sprintf("10.96.1.%d", i+1), fmt.Sprintf("fd00:96::1:%x", i+1)), func(s *model.Service) {
			s.Ports = []model.ServicePort{
				{Name: "http", Protocol: model.ProtocolTCP, Port: 80, NodePort: int32(30000 + i%7)}, // some NodePorts collide
				{Name: "dns", Protocol: model.ProtocolUDP, Port: 53},
			}
			switch i % 4 {
			case 0:
				s.Type, s.ExternalTrafficPolicy = model.ServiceTypeLoadBalancer, model.TrafficPolicyLocal
				s.HealthCheckNodePort = int32(32000 + i)
				s.LoadBalancerIngress = []model.LoadBalancerIngress{
					{IP: ip(fmt.Sprintf("172.26.236.%d", 180+i%5)), IPMode: model.IPModeVIP}, // some collide
					{IP: ip(fmt.Sprintf("fd00:26:236::%x", 180+i)), IPMode: model.IPModeVIP},
				}
				s.LoadBalancerSourceRanges = []netip.Prefix{cidr("172.26.0.0/16"), cidr("fd00::/8")}
			case 1:
				s.Type, s.ExternalTrafficPolicy = model.ServiceTypeNodePort, model.TrafficPolicyCluster
				s.ExternalIPs = ips(fmt.Sprintf("172.26.236.%d", 200+i%3))
			case 2:
				s.InternalTrafficPolicy = model.TrafficPolicyLocal
				s.AffinityClientIP, s.AffinityTimeout = true, 0
				s.Ports[0].NodePort = 0
			case 3:
				s.Ports[0].NodePort = 0
			}
		})
		svcs = append(svcs, s)
		conds := []cond{ready, notReady, servingTerm, termNotServing, servingOnly}
		for k := range 3 {
			var eps4, eps6 []model.Endpoint
			for e := range 4 {
				node := fmt.Sprintf("node%d", 1+r.IntN(3))
				zone := "zone-a"
				if node == "node2" {
					zone = "zone-b"
				}
				var mut []func(*model.Endpoint)
				if i%3 == 0 {
					mut = append(mut, hintZones(zone))
				}
				c := conds[r.IntN(len(conds))]
				host := 10 + (k*4+e)%6 // endpoints repeat across slices
				eps4 = append(eps4, mep(fmt.Sprintf("192.168.%d.%d", i, host), node, zone, c, mut...))
				eps6 = append(eps6, mep(fmt.Sprintf("fd00:192:168:%x::%x", i, host), node, zone, c, mut...))
			}
			ports := []model.EndpointPort{eport("http", model.ProtocolTCP, 8080), eport("dns", model.ProtocolUDP, 53)}
			sls = append(sls,
				slice(name, fmt.Sprintf("%s-v4-%d", name, k), ipfamily.IPv4, ports, eps4...),
				slice(name, fmt.Sprintf("%s-v6-%d", name, k), ipfamily.IPv6, ports, eps6...))
		}
	}
	return svcs, sls
}

// shuffled returns deep-enough copies of the objects in random order, with
// every slice's endpoints and every Service's address lists shuffled too.
func shuffled(r *rand.Rand, svcs []*model.Service, sls []*model.EndpointSlice) ([]*model.Service, []*model.EndpointSlice) {
	outS := make([]*model.Service, len(svcs))
	for i, s := range svcs {
		c := *s
		c.ExternalIPs = slices.Clone(s.ExternalIPs)
		c.LoadBalancerIngress = slices.Clone(s.LoadBalancerIngress)
		c.LoadBalancerSourceRanges = slices.Clone(s.LoadBalancerSourceRanges)
		r.Shuffle(len(c.ExternalIPs), func(a, b int) { c.ExternalIPs[a], c.ExternalIPs[b] = c.ExternalIPs[b], c.ExternalIPs[a] })
		r.Shuffle(len(c.LoadBalancerIngress), func(a, b int) {
			c.LoadBalancerIngress[a], c.LoadBalancerIngress[b] = c.LoadBalancerIngress[b], c.LoadBalancerIngress[a]
		})
		r.Shuffle(len(c.LoadBalancerSourceRanges), func(a, b int) {
			c.LoadBalancerSourceRanges[a], c.LoadBalancerSourceRanges[b] = c.LoadBalancerSourceRanges[b], c.LoadBalancerSourceRanges[a]
		})
		outS[i] = &c
	}
	outL := make([]*model.EndpointSlice, len(sls))
	for i, sl := range sls {
		c := *sl
		c.Endpoints = slices.Clone(sl.Endpoints)
		r.Shuffle(len(c.Endpoints), func(a, b int) { c.Endpoints[a], c.Endpoints[b] = c.Endpoints[b], c.Endpoints[a] })
		outL[i] = &c
	}
	r.Shuffle(len(outS), func(a, b int) { outS[a], outS[b] = outS[b], outS[a] })
	r.Shuffle(len(outL), func(a, b int) { outL[a], outL[b] = outL[b], outL[a] })
	return outS, outL
}

// TestBuildDeterministic builds the same cluster from shuffled input (object
// order, slice order inside a ServiceState, endpoint and address order) and
// wants identical tables.
func TestBuildDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	svcs, sls := randomCluster(r, 24)
	cfg := testNode()
	want := Build(snapshot(t, svcs, sls), cfg)
	if len(want.Ports) < 50 || len(want.Errors) == 0 {
		t.Fatalf("generator too tame: %d entries, %d errors", len(want.Ports), len(want.Errors))
	}
	for i := range 10 {
		s2, l2 := shuffled(r, svcs, sls)
		cfg2 := cfg
		cfg2.NodePortAddresses = slices.Clone(cfg.NodePortAddresses)
		slices.Reverse(cfg2.NodePortAddresses)
		got := Build(snapshot(t, s2, l2), cfg2)
		if d := cmp.Diff(want, got, cmpOpts); d != "" {
			t.Fatalf("shuffle %d: table differs (-first +shuffled):\n%s", i, d)
		}
		// BuildService must not depend on the order of a state's slices either.
		for _, st := range snapshot(t, s2, l2).Services() {
			rev := &model.ServiceState{Service: st.Service, Slices: slices.Clone(st.Slices)}
			slices.Reverse(rev.Slices)
			p1, e1 := BuildService(st, cfg)
			p2, e2 := BuildService(rev, cfg)
			if d := cmp.Diff(p1, p2, cmpOpts); d != "" || !cmp.Equal(e1, e2) {
				t.Fatalf("shuffle %d: BuildService(%s) depends on slice order:\n%s", i, st.Service.Key(), d)
			}
		}
	}
}

// TestBuildEqualsBuildService checks the contract that lets a proxy rebuild one
// Service: Build is Assemble over the BuildService results, which, without
// conflicts, is their concatenation sorted by ID.
func TestBuildEqualsBuildService(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	svcs, sls := randomCluster(r, 16)
	snap := snapshot(t, svcs, sls)
	cfg := testNode()

	var ports []*ServicePort
	var errs []*SkipError
	for _, st := range snap.Services() {
		p, err := BuildService(st, cfg)
		ports = append(ports, p...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	r.Shuffle(len(ports), func(a, b int) { ports[a], ports[b] = ports[b], ports[a] })
	if d := cmp.Diff(Build(snap, cfg), Assemble(cfg, ports, errs), cmpOpts); d != "" {
		t.Errorf("Build != Assemble(BuildService...) (-Build +Assemble):\n%s", d)
	}

	// Without conflicts (no NodePorts, no external addresses), the table is
	// exactly the sorted concatenation.
	var plain []*model.Service
	for _, s := range svcs {
		c := *s
		c.Type, c.ExternalTrafficPolicy, c.HealthCheckNodePort = model.ServiceTypeClusterIP, "", 0
		c.ExternalIPs, c.LoadBalancerIngress = nil, nil
		c.Ports = slices.Clone(s.Ports)
		for i := range c.Ports {
			c.Ports[i].NodePort = 0
		}
		plain = append(plain, &c)
	}
	snap = snapshot(t, plain, sls)
	var concat []*ServicePort
	for _, st := range snap.Services() {
		p, err := BuildService(st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		concat = append(concat, p...)
	}
	slices.SortStableFunc(concat, compareEntries)
	tbl := Build(snap, cfg)
	if tbl.Errors != nil {
		t.Fatalf("unexpected errors: %v", tbl.Errors)
	}
	if d := cmp.Diff(concat, tbl.Ports, cmpOpts); d != "" {
		t.Errorf("Build.Ports != sorted concatenation (-concat +Build):\n%s", d)
	}
}

// TestAssembleOddInput feeds Assemble nils and duplicates.
func TestAssembleOddInput(t *testing.T) {
	a := mustOne(t, state(svc("a", withClusterIPs("10.96.0.1"))), testNode())
	dup := *a
	tbl := Assemble(testNode(), []*ServicePort{nil, a, &dup}, []*SkipError{nil})
	if d := cmp.Diff([]string{"default/a:http/tcp IPv4"}, entryIDs(tbl)); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"default/a http/tcp IPv4"}, skipped(tbl)); d != "" {
		t.Errorf("skipped (-want +got):\n%s", d)
	}
	if tbl.Ports[0] != a {
		t.Errorf("the first of two duplicates is not the one kept")
	}
	if empty := Assemble(NodeConfig{}, nil, nil); empty.Ports != nil || empty.Errors != nil {
		t.Errorf("empty Assemble = %+v", empty)
	}
}

// TestBuildOddInputNoPanic builds Services and slices with every field odd at
// once; it must neither panic nor let the odd Service affect a good one.
func TestBuildOddInputNoPanic(t *testing.T) {
	odd := svc("odd", func(s *model.Service) {
		s.ClusterIPs = ips("10.96.0.9", "10.96.0.10", "fd00:96::9") // two ipfamily.IPv4: the first counts
		s.Type = model.ServiceTypeLoadBalancer
		s.LoadBalancerIngress = []model.LoadBalancerIngress{{}, {Hostname: "x"}, {IP: ip("172.26.236.190"), IPMode: "Weird"}}
		s.LoadBalancerSourceRanges = []netip.Prefix{{}, cidr("::ffff:172.26.0.0/112")}
		s.Ports[0].NodePort = 65535
		s.AffinityClientIP, s.AffinityTimeout = true, -1
	})
	good := svc("good", withClusterIPs("10.96.0.1"))
	sls := []*model.EndpointSlice{
		nil,
		{Namespace: "default", Name: "odd-1", Service: "odd", AddressType: ipfamily.IPv4,
			Ports:     []model.EndpointPort{eport("http", model.ProtocolTCP, -5), eport("http", model.ProtocolTCP, 70000), eport("http", model.ProtocolTCP, 8080)},
			Endpoints: []model.Endpoint{{}, {Addresses: ips("0.0.0.0")}, mep("192.168.1.10", "node1", "", ready, hintZones(), hintNodes(""))}},
		{Namespace: "default", Name: "odd-2", Service: "odd", AddressType: 0 /* an FQDN slice: no IP family */},
		httpSlice("good", "good-1", mep("192.168.2.10", "node2", "zone-b", ready)),
	}
	st := &model.ServiceState{Service: odd, Slices: sls[:3]}
	got, err := BuildService(st, NodeConfig{})
	if err != nil {
		t.Fatalf("BuildService(odd) = %v", err)
	}
	if len(got) != 2 || got[0].ClusterIP != ip("10.96.0.9") || got[0].AffinityTimeout != model.DefaultAffinityTimeout ||
		got[0].LoadBalancerIPs != nil || len(got[0].SourceRanges) != 1 || got[0].SourceRanges[0] != cidr("172.26.0.0/16") {
		t.Errorf("odd entries = %+v", got)
	}
	if s := setsOf(got[0]); !s.Has || len(s.All) != 1 {
		t.Errorf("odd endpoints = %+v, want only 192.168.1.10:8080", s)
	}
	tbl := Build(snapshot(t, []*model.Service{odd, good}, []*model.EndpointSlice{sls[1], sls[2], sls[3]}), testNode())
	if !slices.Contains(entryIDs(tbl), "default/good:http/tcp IPv4") {
		t.Errorf("good Service missing: %v", entryIDs(tbl))
	}
}
