package servicetable

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// TestBuildServiceEntries compares whole entries: frontends, addresses,
// policies, affinity and the endpoint sets they imply.
func TestBuildServiceEntries(t *testing.T) {
	twoEndpoints := httpSlice("web", "web-1",
		mep("192.168.1.10", "node1", "zone-a", ready),
		mep("192.168.2.10", "node2", "zone-b", ready))
	both := []Endpoint{tep("192.168.1.10", 8080), tep("192.168.2.10", 8080, remote)}
	local := []Endpoint{tep("192.168.1.10", 8080)}
	name := PortName{Namespace: "default", Name: "web", Port: "http", Protocol: model.ProtocolTCP}
	base := func(mut func(*ServicePort)) []*ServicePort {
		sp := &ServicePort{
			ID: "default/web:http/tcp", Name: name, Family: ipfamily.IPv4, Protocol: model.ProtocolTCP, Port: 80,
			ClusterIP:        ip("10.96.0.20"),
			Frontends:        []Frontend{{FrontendClusterIP, ip("10.96.0.20"), 80}},
			ClusterEndpoints: both, HasEndpoints: true, AllEndpoints: both,
		}
		if mut != nil {
			mut(sp)
		}
		return []*ServicePort{sp}
	}
	nodePorts := func(port uint16) []Frontend {
		return []Frontend{{FrontendClusterIP, ip("10.96.0.20"), 80}, {FrontendNodePort, ip("172.26.236.177"), port}}
	}

	tests := []struct {
		name   string
		svc    *model.Service
		slices []*model.EndpointSlice
		cfg    NodeConfig
		want   []*ServicePort
	}{{
		name:   "ClusterIP, named port",
		svc:    svc("web"),
		slices: []*model.EndpointSlice{twoEndpoints},
		want:   base(nil),
	}, {
		name: "unnamed port: ID carries the number",
		svc:  svc("web", withPorts(model.ServicePort{Protocol: model.ProtocolUDP, Port: 53, TargetPort: 5353})),
		slices: []*model.EndpointSlice{slice("web", "web-1", ipfamily.IPv4, []model.EndpointPort{eport("", model.ProtocolUDP, 5353)},
			mep("192.168.2.10", "node2", "zone-b", ready))},
		want: base(func(sp *ServicePort) {
			sp.ID, sp.Name.Port, sp.Name.Protocol, sp.Protocol, sp.Port = "default/web:53/udp", "", model.ProtocolUDP, model.ProtocolUDP, 53
			sp.Frontends = []Frontend{{FrontendClusterIP, ip("10.96.0.20"), 53}}
			sp.ClusterEndpoints = []Endpoint{tep("192.168.2.10", 5353, remote)}
			sp.AllEndpoints = sp.ClusterEndpoints
		}),
	}, {
		name: "no endpoints: HasEndpoints false, sets nil",
		svc:  svc("web"),
		want: base(func(sp *ServicePort) { sp.ClusterEndpoints, sp.AllEndpoints, sp.HasEndpoints = nil, nil, false }),
	}, {
		name:   "NodePort on node-port addresses of the family, never loopback",
		svc:    svc("web", withType(model.ServiceTypeNodePort, model.TrafficPolicyCluster), withPorts(model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 80, NodePort: 30080})),
		slices: []*model.EndpointSlice{twoEndpoints},
		want:   base(func(sp *ServicePort) { sp.NodePort, sp.Frontends = 30080, nodePorts(30080) }),
	}, {
		name:   "NodePort with no node-port address: no NodePort frontend, still externally accessible",
		svc:    svc("web", withType(model.ServiceTypeNodePort, model.TrafficPolicyLocal), withPorts(model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 80, NodePort: 30080})),
		slices: []*model.EndpointSlice{twoEndpoints},
		cfg:    NodeConfig{NodeName: "node1", Zone: "zone-a", NodePortAddresses: ips("127.0.0.1", "::1")},
		want: base(func(sp *ServicePort) {
			sp.NodePort, sp.ExternalPolicyLocal, sp.LocalEndpoints = 30080, true, local
		}),
	}, {
		name: "externalIPs and LB IPs of the family; Proxy-mode and hostname ingress left out; duplicates once",
		svc: svc("web", withType(model.ServiceTypeLoadBalancer, model.TrafficPolicyCluster), func(s *model.Service) {
			s.Ports[0].NodePort = 30080
			s.ExternalIPs = ips("172.26.236.201", "fd00:26:236::201", "172.26.236.200")
			s.LoadBalancerIngress = []model.LoadBalancerIngress{
				{IP: ip("172.26.236.181"), IPMode: model.IPModeVIP},
				{IP: ip("172.26.236.180")}, // unset mode is VIP
				{IP: ip("172.26.236.182"), IPMode: model.IPModeProxy},
				{Hostname: "lb.example", IPMode: model.IPModeVIP},
				{IP: ip("fd00:26:236::180"), IPMode: model.IPModeVIP},
				{IP: ip("172.26.236.200"), IPMode: model.IPModeVIP}, // also an externalIP
			}
		}),
		slices: []*model.EndpointSlice{twoEndpoints},
		want: base(func(sp *ServicePort) {
			sp.NodePort = 30080
			sp.ExternalIPs = ips("172.26.236.200", "172.26.236.201")
			sp.LoadBalancerIPs = ips("172.26.236.180", "172.26.236.181", "172.26.236.200")
			sp.Frontends = []Frontend{
				{FrontendClusterIP, ip("10.96.0.20"), 80},
				{FrontendExternalIP, ip("172.26.236.200"), 80},
				{FrontendExternalIP, ip("172.26.236.201"), 80},
				{FrontendLoadBalancer, ip("172.26.236.180"), 80},
				{FrontendLoadBalancer, ip("172.26.236.181"), 80},
				{FrontendNodePort, ip("172.26.236.177"), 30080},
			}
		}),
	}, {
		name: "source ranges of the family, masked, sorted; a zero prefix allows all",
		svc: svc("web", withType(model.ServiceTypeLoadBalancer, model.TrafficPolicyCluster), func(s *model.Service) {
			s.LoadBalancerIngress = []model.LoadBalancerIngress{{IP: ip("172.26.236.180"), IPMode: model.IPModeVIP}}
			s.LoadBalancerSourceRanges = []netip.Prefix{cidr("172.26.0.0/16"), cidr("fd00::/8"), cidr("10.1.2.3/8"), cidr("172.26.0.0/16")}
		}),
		slices: []*model.EndpointSlice{twoEndpoints},
		want: base(func(sp *ServicePort) {
			sp.LoadBalancerIPs = ips("172.26.236.180")
			sp.SourceRanges = []netip.Prefix{cidr("10.0.0.0/8"), cidr("172.26.0.0/16")}
			sp.Frontends = append(sp.Frontends, Frontend{FrontendLoadBalancer, ip("172.26.236.180"), 80})
		}),
	}, {
		name: "source range 0.0.0.0/0 empties the IPv4 list",
		svc: svc("web", withType(model.ServiceTypeLoadBalancer, model.TrafficPolicyCluster), func(s *model.Service) {
			s.LoadBalancerSourceRanges = []netip.Prefix{cidr("172.26.0.0/16"), cidr("0.0.0.0/0"), cidr("10.0.0.0/8")}
		}),
		slices: []*model.EndpointSlice{twoEndpoints},
		want:   base(nil),
	}, {
		name: "externalTrafficPolicy Local on a LoadBalancer: local endpoints, short-circuit cluster set, health check port",
		svc: svc("web", withType(model.ServiceTypeLoadBalancer, model.TrafficPolicyLocal), func(s *model.Service) {
			s.Ports[0].NodePort = 30080
			s.HealthCheckNodePort = 32000
		}),
		slices: []*model.EndpointSlice{twoEndpoints},
		want: base(func(sp *ServicePort) {
			sp.NodePort, sp.Frontends = 30080, nodePorts(30080)
			sp.ExternalPolicyLocal, sp.HealthCheckNodePort, sp.LocalEndpoints = true, 32000, local
		}),
	}, {
		name: "externalTrafficPolicy Local on a NodePort: no health check port",
		svc: svc("web", withType(model.ServiceTypeNodePort, model.TrafficPolicyLocal), func(s *model.Service) {
			s.Ports[0].NodePort = 30080
			s.HealthCheckNodePort = 32000 // not valid for NodePort; ignored as kube-proxy does
		}),
		slices: []*model.EndpointSlice{twoEndpoints},
		want: base(func(sp *ServicePort) {
			sp.NodePort, sp.Frontends = 30080, nodePorts(30080)
			sp.ExternalPolicyLocal, sp.LocalEndpoints = true, local
		}),
	}, {
		name: "externalTrafficPolicy Local on a LoadBalancer without node port or ingress: not externally accessible",
		svc: svc("web", withType(model.ServiceTypeLoadBalancer, model.TrafficPolicyLocal), func(s *model.Service) {
			s.HealthCheckNodePort = 32000
		}),
		slices: []*model.EndpointSlice{twoEndpoints},
		want:   base(func(sp *ServicePort) { sp.HealthCheckNodePort = 32000 }),
	}, {
		name:   "externalTrafficPolicy Cluster: no local set",
		svc:    svc("web", withType(model.ServiceTypeNodePort, model.TrafficPolicyCluster), withPorts(model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 80, NodePort: 30080})),
		slices: []*model.EndpointSlice{twoEndpoints},
		want:   base(func(sp *ServicePort) { sp.NodePort, sp.Frontends = 30080, nodePorts(30080) }),
	}, {
		name:   "internalTrafficPolicy Local, ClusterIP only: no cluster set",
		svc:    svc("web", func(s *model.Service) { s.InternalTrafficPolicy = model.TrafficPolicyLocal }),
		slices: []*model.EndpointSlice{twoEndpoints},
		want: base(func(sp *ServicePort) {
			sp.InternalPolicyLocal, sp.ClusterEndpoints, sp.LocalEndpoints = true, nil, local
		}),
	}, {
		name: "internalTrafficPolicy Local with a NodePort: both sets",
		svc: svc("web", withType(model.ServiceTypeNodePort, model.TrafficPolicyCluster), func(s *model.Service) {
			s.InternalTrafficPolicy = model.TrafficPolicyLocal
			s.Ports[0].NodePort = 30080
		}),
		slices: []*model.EndpointSlice{twoEndpoints},
		want: base(func(sp *ServicePort) {
			sp.NodePort, sp.Frontends = 30080, nodePorts(30080)
			sp.InternalPolicyLocal, sp.LocalEndpoints = true, local
		}),
	}, {
		name:   "ClientIP affinity, default timeout",
		svc:    svc("web", func(s *model.Service) { s.AffinityClientIP = true }),
		slices: []*model.EndpointSlice{twoEndpoints},
		want:   base(func(sp *ServicePort) { sp.AffinityTimeout = model.DefaultAffinityTimeout }),
	}, {
		name:   "ClientIP affinity, custom timeout",
		svc:    svc("web", func(s *model.Service) { s.AffinityClientIP, s.AffinityTimeout = true, 90*time.Second }),
		slices: []*model.EndpointSlice{twoEndpoints},
		want:   base(func(sp *ServicePort) { sp.AffinityTimeout = 90 * time.Second }),
	}, {
		name:   "no affinity: timeout ignored",
		svc:    svc("web", func(s *model.Service) { s.AffinityTimeout = time.Minute }),
		slices: []*model.EndpointSlice{twoEndpoints},
		want:   base(nil),
	}, {
		name: "Service labelled headless but with a clusterIP is proxied, as kube-proxy",
		svc:  svc("web", func(s *model.Service) { s.Headless = true }),
		want: base(func(sp *ServicePort) { sp.ClusterEndpoints, sp.AllEndpoints, sp.HasEndpoints = nil, nil, false }),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.NodeName == "" {
				cfg = testNode()
			}
			got, err := BuildService(state(tc.svc, tc.slices...), cfg)
			if err != nil {
				t.Fatalf("BuildService: %v", err)
			}
			if d := cmp.Diff(tc.want, got, cmpOpts); d != "" {
				t.Errorf("entries (-want +got):\n%s", d)
			}
		})
	}
}

func TestBuildServiceDualStack(t *testing.T) {
	s := svc("web", withClusterIPs("fd00:96::20", "10.96.0.20"), withType(model.ServiceTypeLoadBalancer, model.TrafficPolicyCluster), func(s *model.Service) {
		s.IPFamilies = []ipfamily.Family{ipfamily.IPv6, ipfamily.IPv4}
		s.Ports[0].NodePort = 30080
		s.ExternalIPs = ips("172.26.236.200", "fd00:26:236::200")
		s.LoadBalancerIngress = []model.LoadBalancerIngress{{IP: ip("fd00:26:236::180"), IPMode: model.IPModeVIP}}
		s.LoadBalancerSourceRanges = []netip.Prefix{cidr("fd00:26::/32"), cidr("172.26.0.0/16")}
	})
	v4 := httpSlice("web", "web-v4", mep("192.168.1.10", "node1", "zone-a", ready))
	v6 := slice("web", "web-v6", ipfamily.IPv6, []model.EndpointPort{eport("http", model.ProtocolTCP, 8080)},
		mep("fd00:192:168:2::10", "node2", "zone-b", ready))
	got, err := BuildService(state(s, v6, v4), testNode())
	if err != nil {
		t.Fatal(err)
	}
	name := PortName{Namespace: "default", Name: "web", Port: "http", Protocol: model.ProtocolTCP}
	e4 := []Endpoint{tep("192.168.1.10", 8080)}
	e6 := []Endpoint{tep("fd00:192:168:2::10", 8080, remote)}
	want := []*ServicePort{{
		ID: "default/web:http/tcp", Name: name, Family: ipfamily.IPv4, Protocol: model.ProtocolTCP, Port: 80, NodePort: 30080,
		ClusterIP: ip("10.96.0.20"), ExternalIPs: ips("172.26.236.200"), SourceRanges: []netip.Prefix{cidr("172.26.0.0/16")},
		Frontends: []Frontend{
			{FrontendClusterIP, ip("10.96.0.20"), 80},
			{FrontendExternalIP, ip("172.26.236.200"), 80},
			{FrontendNodePort, ip("172.26.236.177"), 30080},
		},
		ClusterEndpoints: e4, HasEndpoints: true, AllEndpoints: e4,
	}, {
		ID: "default/web:http/tcp", Name: name, Family: ipfamily.IPv6, Protocol: model.ProtocolTCP, Port: 80, NodePort: 30080,
		ClusterIP: ip("fd00:96::20"), ExternalIPs: ips("fd00:26:236::200"), LoadBalancerIPs: ips("fd00:26:236::180"),
		SourceRanges: []netip.Prefix{cidr("fd00:26::/32")},
		Frontends: []Frontend{
			{FrontendClusterIP, ip("fd00:96::20"), 80},
			{FrontendExternalIP, ip("fd00:26:236::200"), 80},
			{FrontendLoadBalancer, ip("fd00:26:236::180"), 80},
			{FrontendNodePort, ip("fd00:26:236::177"), 30080},
		},
		ClusterEndpoints: e6, HasEndpoints: true, AllEndpoints: e6,
	}}
	if d := cmp.Diff(want, got, cmpOpts); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
}

func TestBuildServiceMultiplePortsSorted(t *testing.T) {
	s := svc("web", withPorts(
		model.ServicePort{Name: "https", Protocol: model.ProtocolTCP, Port: 443},
		model.ServicePort{Name: "dns", Protocol: model.ProtocolUDP, Port: 53},
		model.ServicePort{Name: "dns", Protocol: model.ProtocolTCP, Port: 53},
	), withClusterIPs("10.96.0.20", "fd00:96::20"))
	got, err := BuildService(state(s), testNode())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sp := range got {
		ids = append(ids, sp.ID+" "+sp.Family.String())
	}
	want := []string{
		"default/web:dns/tcp IPv4", "default/web:dns/tcp IPv6",
		"default/web:dns/udp IPv4", "default/web:dns/udp IPv6",
		"default/web:https/tcp IPv4", "default/web:https/tcp IPv6",
	}
	if d := cmp.Diff(want, ids); d != "" {
		t.Errorf("IDs (-want +got):\n%s", d)
	}
}

// TestBuildServiceNothing covers Services kube-proxy does not proxy: no entry,
// no error.
func TestBuildServiceNothing(t *testing.T) {
	tests := map[string]*model.ServiceState{
		"nil state":   nil,
		"nil Service": {Slices: []*model.EndpointSlice{httpSlice("web", "web-1", mep("192.168.1.10", "node1", "", ready))}},
		"ExternalName": state(svc("web", withType(model.ServiceTypeExternalName, ""), func(s *model.Service) {
			s.ExternalName = "example.com"
		})),
		"ExternalName with a clusterIP": state(svc("web", withType(model.ServiceTypeExternalName, ""))),
		"headless": state(svc("web", withClusterIPs(), func(s *model.Service) { s.Headless = true }),
			httpSlice("web", "web-1", mep("192.168.1.10", "node1", "", ready))),
		"no ports": state(svc("web", withPorts())),
	}
	for name, st := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := BuildService(st, testNode())
			if got != nil || err != nil {
				t.Errorf("BuildService = %v, %v; want nothing", got, err)
			}
		})
	}
}

// TestBuildServiceInvalid covers values the apiserver would reject: the
// Service is skipped whole with a reason naming the field.
func TestBuildServiceInvalid(t *testing.T) {
	tests := []struct {
		name   string
		svc    *model.Service
		reason string
	}{
		{"port zero", svc("web", withPorts(model.ServicePort{Name: "http", Protocol: model.ProtocolTCP})), "spec.ports[0].port 0 out of range"},
		{"port too large", svc("web", withPorts(model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 70000})), "spec.ports[0].port 70000"},
		{"node port negative", svc("web", withPorts(model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 80, NodePort: -1})), "spec.ports[0].nodePort -1"},
		{"unknown protocol", svc("web", withPorts(model.ServicePort{Name: "http", Protocol: "ICMP", Port: 80})), `protocol "ICMP" not supported`},
		{"empty protocol", svc("web", withPorts(model.ServicePort{Name: "http", Port: 80})), `protocol "" not supported`},
		{"duplicate port", svc("web", withPorts(
			model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 80},
			model.ServicePort{Name: "http", Protocol: model.ProtocolTCP, Port: 8080})), "spec.ports[1] duplicates spec.ports[0] (http/tcp)"},
		{"health check port out of range", svc("web", func(s *model.Service) { s.HealthCheckNodePort = 70000 }), "spec.healthCheckNodePort 70000"},
		{"loopback clusterIP", svc("web", withClusterIPs("127.0.0.5")), "spec.clusterIPs[0] 127.0.0.5"},
		{"unspecified externalIP", svc("web", func(s *model.Service) { s.ExternalIPs = ips("0.0.0.0") }), "spec.externalIPs[0] 0.0.0.0"},
		{"loopback externalIP", svc("web", func(s *model.Service) { s.ExternalIPs = ips("172.26.236.200", "::1") }), "spec.externalIPs[1] ::1"},
		{"unknown scheduler", svc("web", func(s *model.Service) {
			s.Annotations = map[string]string{model.SchedulerAnnotation: "wlc"}
		}), `annotation svcnet.io/scheduler: "wlc": want random, rr, sh, lc`},
		{"link-local LB IP", svc("web", func(s *model.Service) {
			s.LoadBalancerIngress = []model.LoadBalancerIngress{{IP: ip("169.254.1.1"), IPMode: model.IPModeVIP}}
		}), "status.loadBalancer.ingress[0].ip 169.254.1.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BuildService(state(tc.svc), testNode())
			if got != nil {
				t.Errorf("BuildService returned %d entries, want none", len(got))
			}
			if err == nil || err.Service != tc.svc.Key() || err.Port != "" || !strings.Contains(err.Reason, tc.reason) {
				t.Fatalf("error = %v, want whole-Service skip with %q", err, tc.reason)
			}
		})
	}
}

// The scheduler annotation reaches every entry of the Service.
func TestBuildServiceScheduler(t *testing.T) {
	s := svc("web", func(s *model.Service) { s.Annotations = map[string]string{model.SchedulerAnnotation: "sh"} })
	got, err := BuildService(state(s), testNode())
	if err != nil || len(got) == 0 {
		t.Fatalf("BuildService = %d entries, %v", len(got), err)
	}
	for _, sp := range got {
		if sp.Scheduler != "sh" {
			t.Errorf("%s (%s): scheduler %q, want sh", sp.ID, sp.Family, sp.Scheduler)
		}
	}
}

func TestNodePortAddressesNormalized(t *testing.T) {
	cfg := NodeConfig{NodePortAddresses: ips("172.26.236.178", "::ffff:172.26.236.177", "127.0.0.1", "0.0.0.0", "::1", "ff02::1", "172.26.236.178")}
	cfg.NodePortAddresses = append(cfg.NodePortAddresses, netip.Addr{})
	tbl := Build(nil, cfg)
	if d := cmp.Diff(ips("172.26.236.177", "172.26.236.178"), tbl.Node.NodePortAddresses, cmpOpts); d != "" {
		t.Errorf("NodePortAddresses (-want +got):\n%s", d)
	}
	if len(cfg.NodePortAddresses) != 8 {
		t.Errorf("Build changed the caller's NodeConfig")
	}
	if tbl.Ports != nil || tbl.Errors != nil {
		t.Errorf("table of a nil snapshot = %+v, want empty", tbl)
	}
}

func TestSkipErrorString(t *testing.T) {
	k := model.ServiceKey{Namespace: "default", Name: "web"}
	for _, tc := range []struct {
		err  *SkipError
		want string
	}{
		{&SkipError{Service: k, Reason: "bad"}, "Service default/web: bad"},
		{&SkipError{Service: k, Port: "http/tcp", Reason: "taken"}, "Service default/web port http/tcp: taken"},
		{&SkipError{Service: k, Port: "http/tcp", Family: ipfamily.IPv6, Reason: "taken"}, "Service default/web port http/tcp (IPv6): taken"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
