package controlplane

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// tiny is a /29: six usable addresses, the first for default/kubernetes.
var tiny = Config{ServiceCIDRs: []netip.Prefix{mustPrefix("10.0.0.0/29")}}

func services(names ...string) []runtimeObject {
	var out []runtimeObject
	for _, n := range names {
		out = append(out, svc(n))
	}
	return out
}

// allocs maps namespace/name to a readable summary of what each Service holds.
func allocs(res Result) map[string]string {
	out := map[string]string{}
	for _, s := range res.Services {
		var np []int32
		for _, p := range s.Spec.Ports {
			np = append(np, p.NodePort)
		}
		out[s.Namespace+"/"+s.Name] = fmt.Sprint(s.Spec.ClusterIPs, np, s.Spec.HealthCheckNodePort)
	}
	return out
}

func errorStrings(res Result) []string {
	var out []string
	for _, e := range res.Errors {
		out = append(out, e.Error())
	}
	return out
}

func TestClusterIPExhaustion(t *testing.T) {
	res := Reconcile(tiny, toObjects(services("s0", "s1", "s2", "s3", "s4", "s5")...), State{}, testNow)
	want := []string{`obj5.yaml: Service default/s5: failed to allocate a serviceIP for Service "s5": range is full`}
	if diff := cmp.Diff(want, errorStrings(res)); diff != "" {
		t.Fatalf("errors (-want +got):\n%s", diff)
	}
	if !errors.Is(res.Errors[0], ErrRangeFull) {
		t.Errorf("error does not wrap ErrRangeFull")
	}
	if len(res.Services) != 6 { // kubernetes + s0..s4
		t.Errorf("got %d Services, want 6: the full range fails only s5", len(res.Services))
	}
	if _, ok := res.State.Services["default/s5"]; ok {
		t.Errorf("State has the Service that got nothing")
	}
}

func TestReleaseAndReuseAfterDelete(t *testing.T) {
	first := runWith(t, tiny, State{}, services("s0", "s1", "s2", "s3", "s4")...)
	freed := findService(t, first, "default", "s2").Spec.ClusterIP
	second := runWith(t, tiny, first.State, services("s0", "s1", "s3", "s4", "s9")...)
	if got := findService(t, second, "default", "s9").Spec.ClusterIP; got != freed {
		t.Errorf("new Service got %s, want %s freed by the deleted one", got, freed)
	}
	for _, n := range []string{"s0", "s1", "s3", "s4"} {
		a, b := findService(t, first, "default", n), findService(t, second, "default", n)
		if a.Spec.ClusterIP != b.Spec.ClusterIP {
			t.Errorf("%s moved from %s to %s", n, a.Spec.ClusterIP, b.Spec.ClusterIP)
		}
	}
	if _, ok := second.State.Services["default/s2"]; ok {
		t.Errorf("State still has the deleted Service")
	}
}

func TestDualStackAllocation(t *testing.T) {
	res := runWith(t, dualStack, State{}, svc("web", withPolicy(*require)), svc("v6", withPolicy(*single, v6)))
	web := findService(t, res, "default", "web")
	if len(web.Spec.ClusterIPs) != 2 ||
		!dualStack.ServiceCIDRs[0].Contains(mustAddr(web.Spec.ClusterIPs[0])) ||
		!dualStack.ServiceCIDRs[1].Contains(mustAddr(web.Spec.ClusterIPs[1])) {
		t.Errorf("dual-stack clusterIPs = %v, want one from each range, IPv4 first", web.Spec.ClusterIPs)
	}
	if got := res.State.Services["default/web"].ClusterIPs; !cmp.Equal(got, web.Spec.ClusterIPs) {
		t.Errorf("State clusterIPs = %v, want %v", got, web.Spec.ClusterIPs)
	}
	if ip := findService(t, res, "default", "v6").Spec.ClusterIP; !dualStack.ServiceCIDRs[1].Contains(mustAddr(ip)) {
		t.Errorf("IPv6 SingleStack clusterIP = %s", ip)
	}
	again := runWith(t, dualStack, res.State, svc("web", withPolicy(*require)), svc("v6", withPolicy(*single, v6)))
	if diff := cmp.Diff(allocs(res), allocs(again)); diff != "" {
		t.Errorf("second run moved allocations (-first +second):\n%s", diff)
	}
}

func TestRequestedIPAndPorts(t *testing.T) {
	s := svc("web", withType(corev1.ServiceTypeLoadBalancer), withClusterIP("10.96.0.50"), func(s *corev1.Service) {
		s.Spec.Ports[0].NodePort = 30050
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 30051
	})
	res := run(t, s)
	if got, want := allocs(res)["default/web"], "[10.96.0.50] [30050] 30051"; got != want {
		t.Errorf("allocations = %s, want %s", got, want)
	}
}

func TestConflictingRequests(t *testing.T) {
	a := svc("a", withType(corev1.ServiceTypeNodePort), withClusterIP("10.96.0.50"), func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30050 })
	b := svc("b", withClusterIP("10.96.0.50"))
	c := svc("c", withType(corev1.ServiceTypeNodePort), func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30050 })
	res := Reconcile(DefaultConfig(), toObjects(c, b, a), State{}, testNow)
	want := []string{
		"obj0.yaml: Service default/c: spec.ports[0].nodePort: Invalid value: 30050: provided port is already allocated",
		`obj1.yaml: Service default/b: spec.clusterIPs: Invalid value: ["10.96.0.50"]: failed to allocate IP 10.96.0.50: provided IP is already allocated`,
	}
	if diff := cmp.Diff(want, errorStrings(res)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if got := allocs(res)["default/a"]; got != "[10.96.0.50] [30050] 0" {
		t.Errorf("a = %s, want the IP and port it asked for", got)
	}
}

// TestExistingAllocationWins: an IP a Service got dynamically stays with it when a
// new Service, earlier in name order, asks for that IP explicitly.
func TestExistingAllocationWins(t *testing.T) {
	first := run(t, svc("zz"))
	taken := findService(t, first, "default", "zz").Spec.ClusterIP
	res := Reconcile(DefaultConfig(), toObjects(svc("zz"), svc("aa", withClusterIP(taken))), first.State, testNow)
	want := []string{fmt.Sprintf(`obj1.yaml: Service default/aa: spec.clusterIPs: Invalid value: ["%s"]: failed to allocate IP %s: provided IP is already allocated`, taken, taken)}
	if diff := cmp.Diff(want, errorStrings(res)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if got := findService(t, res, "default", "zz").Spec.ClusterIP; got != taken {
		t.Errorf("zz moved to %s", got)
	}
}

func TestRequestOutOfRange(t *testing.T) {
	res := Reconcile(DefaultConfig(), toObjects(
		svc("a", withClusterIP("10.0.0.5")),
		svc("b", withClusterIP("10.96.0.0")),
		svc("c", withType(corev1.ServiceTypeNodePort), func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 20000 }),
	), State{}, testNow)
	want := []string{
		`obj0.yaml: Service default/a: spec.clusterIPs: Invalid value: ["10.0.0.5"]: failed to allocate IP 10.0.0.5: the provided IP (10.0.0.5) is not in the valid range. The range of valid IPs is 10.96.0.0/12`,
		`obj1.yaml: Service default/b: spec.clusterIPs: Invalid value: ["10.96.0.0"]: failed to allocate IP 10.96.0.0: the provided IP (10.96.0.0) is not in the valid range. The range of valid IPs is 10.96.0.0/12`,
		`obj2.yaml: Service default/c: spec.ports[0].nodePort: Invalid value: 20000: provided port is not in the valid range. The range of valid ports is 30000-32767`,
	}
	if diff := cmp.Diff(want, errorStrings(res)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestStability(t *testing.T) {
	objs := []runtimeObject{
		svc("web", withType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}),
		svc("api", withType(corev1.ServiceTypeNodePort)),
		svc("db", withClusterIP("None")),
		svc("cache"),
		pod("web-1", "web", "192.168.1.10"),
	}
	first := run(t, objs...)
	second := runWith(t, DefaultConfig(), first.State, objs...)
	if diff := cmp.Diff(first, second, sameErrorText); diff != "" {
		t.Errorf("same manifests and State gave a different Result (-first +second):\n%s", diff)
	}
	// More Services, placed before and after the others in name order: nothing moves.
	more := append([]runtimeObject{svc("aaa", withType(corev1.ServiceTypeNodePort)), svc("zzz", withType(corev1.ServiceTypeLoadBalancer))}, objs...)
	third := runWith(t, DefaultConfig(), second.State, more...)
	for key, want := range allocs(first) {
		if got := allocs(third)[key]; got != want {
			t.Errorf("%s moved from %s to %s when Services were added", key, want, got)
		}
	}
}

func TestUpperBandPreference(t *testing.T) {
	var objs []runtimeObject
	for i := 0; i < 50; i++ {
		objs = append(objs, svc(fmt.Sprintf("s%02d", i), withType(corev1.ServiceTypeNodePort)))
	}
	objs = append(objs, svc("static", withClusterIP("10.96.0.20"), withType(corev1.ServiceTypeNodePort),
		func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30020 }))
	res := run(t, objs...)
	upper := mustAddr("10.96.1.1") // 10.96.0.1 + 256
	for _, s := range res.Services {
		ip := mustAddr(s.Spec.ClusterIP)
		switch s.Name {
		case "kubernetes", "static":
			continue
		}
		if ip.Less(upper) || s.Spec.Ports[0].NodePort < 30086 {
			t.Errorf("%s got %s and node port %d in the static band", s.Name, ip, s.Spec.Ports[0].NodePort)
		}
	}
	if got := allocs(res)["default/static"]; got != "[10.96.0.20] [30020] 0" {
		t.Errorf("static request = %s", got)
	}
}

func TestTypeChangeReleases(t *testing.T) {
	lb := svc("web", withType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	first := run(t, lb)
	before := findService(t, first, "default", "web")
	port, hc := before.Spec.Ports[0].NodePort, before.Spec.HealthCheckNodePort
	// web becomes ClusterIP; another Service asks for web's old ports.
	other := svc("other", withType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) {
		s.Spec.Ports[0].NodePort = port
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hc
	})
	second := runWith(t, DefaultConfig(), first.State, svc("web"), other)
	web := findService(t, second, "default", "web")
	if web.Spec.ClusterIP != before.Spec.ClusterIP || web.Spec.Ports[0].NodePort != 0 || web.Spec.HealthCheckNodePort != 0 {
		t.Errorf("web after the change: %s, want same IP and no node ports", allocs(second)["default/web"])
	}
	st := second.State.Services["default/web"]
	if len(st.NodePorts) != 0 || st.HealthCheckNodePort != 0 {
		t.Errorf("State kept node ports of a ClusterIP Service: %+v", st)
	}
	// ClusterIP -> ExternalName releases the IP.
	ext := svc("web", withType(corev1.ServiceTypeExternalName), noSelector, func(s *corev1.Service) { s.Spec.ExternalName = "example.com" })
	third := runWith(t, DefaultConfig(), second.State, ext, svc("taker", withClusterIP(before.Spec.ClusterIP)))
	if got := third.State.Services["default/web"]; len(got.ClusterIPs) != 0 || got.UID != st.UID {
		t.Errorf("ExternalName State entry = %+v, want no IPs and the same UID", got)
	}
}

func TestPortsKeptWhenPortsChange(t *testing.T) {
	np := func(ports ...corev1.ServicePort) *corev1.Service {
		return svc("web", withType(corev1.ServiceTypeNodePort), withPorts(ports...))
	}
	first := run(t, np(tcp("a", 80, intstr.IntOrString{}), tcp("b", 81, intstr.IntOrString{})))
	a := findService(t, first, "default", "web").Spec.Ports
	second := runWith(t, DefaultConfig(), first.State, np(tcp("b", 81, intstr.IntOrString{}), tcp("c", 82, intstr.IntOrString{}), tcp("a", 80, intstr.IntOrString{})))
	b := findService(t, second, "default", "web").Spec.Ports
	if b[0].NodePort != a[1].NodePort || b[2].NodePort != a[0].NodePort {
		t.Errorf("node ports moved: before %v, after %v", a, b)
	}
	if b[1].NodePort == 0 || b[1].NodePort == a[0].NodePort || b[1].NodePort == a[1].NodePort {
		t.Errorf("new port got node port %d", b[1].NodePort)
	}
}

func TestTCPAndUDPShareNodePort(t *testing.T) {
	dns := svc("dns", withType(corev1.ServiceTypeNodePort), withPorts(
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP},
	))
	asked := svc("asked", withType(corev1.ServiceTypeNodePort), withPorts(
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, NodePort: 30053},
	))
	res := run(t, dns, asked)
	p := findService(t, res, "default", "dns").Spec.Ports
	if p[0].NodePort == 0 || p[0].NodePort != p[1].NodePort || p[2].NodePort == p[0].NodePort {
		t.Errorf("dns node ports = %d %d %d, want UDP and TCP 53 to share one", p[0].NodePort, p[1].NodePort, p[2].NodePort)
	}
	if got := allocs(res)["default/asked"]; got[len(got)-15:] != "[30053 30053] 0" {
		t.Errorf("asked = %s, want both entries of port 53 on 30053", got)
	}
	// Two port numbers may not share a node port.
	bad := svc("bad", withType(corev1.ServiceTypeNodePort), withPorts(
		corev1.ServicePort{Name: "a", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30054},
		corev1.ServicePort{Name: "b", Port: 54, Protocol: corev1.ProtocolTCP, NodePort: 30054},
	))
	res = Reconcile(DefaultConfig(), toObjects(bad), State{}, testNow)
	want := []string{"obj0.yaml: Service default/bad: spec.ports[1].nodePort: Invalid value: 30054: provided port is already allocated"}
	if diff := cmp.Diff(want, errorStrings(res)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestLoadBalancerWithoutNodePorts(t *testing.T) {
	s := svc("lb", withType(corev1.ServiceTypeLoadBalancer), withPorts(tcp("a", 80, intstr.IntOrString{}), corev1.ServicePort{Name: "b", Port: 81, NodePort: 30081}),
		func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr(false) })
	res := run(t, s)
	p := findService(t, res, "default", "lb").Spec.Ports
	if p[0].NodePort != 0 || p[1].NodePort != 30081 {
		t.Errorf("node ports = %d %d, want none allocated and the requested one kept", p[0].NodePort, p[1].NodePort)
	}
}

// TestInvalidServiceKeepsItsAllocations: a Service broken by an edit is left out
// but keeps its ClusterIP reserved, and gets it back once fixed.
func TestInvalidServiceKeepsItsAllocations(t *testing.T) {
	first := runWith(t, tiny, State{}, services("a", "b", "c", "d")...)
	ipOfA := findService(t, first, "default", "a").Spec.ClusterIP
	broken := svc("a", withPorts(corev1.ServicePort{Port: 0}))
	second := Reconcile(tiny, toObjects(broken, svc("b"), svc("c"), svc("d"), svc("e")), first.State, testNow)
	if len(second.Errors) != 1 || second.Errors[0].Name != "a" {
		t.Fatalf("errors = %v, want only a's", errorStrings(second))
	}
	if got := findService(t, second, "default", "e").Spec.ClusterIP; got == ipOfA {
		t.Errorf("new Service took the IP of the broken one")
	}
	if got := second.State.Services["default/a"]; !cmp.Equal(got, first.State.Services["default/a"]) {
		t.Errorf("State of the broken Service = %+v, want it kept", got)
	}
	third := runWith(t, tiny, second.State, services("a", "b", "c", "d", "e")...)
	if got := findService(t, third, "default", "a").Spec.ClusterIP; got != ipOfA {
		t.Errorf("fixed Service got %s, want its old %s", got, ipOfA)
	}
}

// TestFailedServiceHoldsNothing: a new Service that gets its IP and then fails on a
// full node port range gives the IP back in the same run.
func TestFailedServiceHoldsNothing(t *testing.T) {
	cfg := Config{ServiceCIDRs: tiny.ServiceCIDRs, NodePortRange: PortRange{30000, 30000}}
	objs := append(toObjects(svc("a", withType(corev1.ServiceTypeNodePort)), svc("b", withType(corev1.ServiceTypeNodePort))),
		toObjects(services("z1", "z2", "z3", "z4")...)...)
	res := Reconcile(cfg, objs, State{}, testNow)
	want := []string{"obj1.yaml: Service default/b: failed to allocate a nodePort: range is full"}
	if diff := cmp.Diff(want, errorStrings(res)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if len(res.Services) != 6 {
		t.Errorf("got %d Services, want kubernetes, a and z1..z4 in the six addresses", len(res.Services))
	}
}

func TestPriorOutsideNewRange(t *testing.T) {
	first := run(t, svc("web"))
	cfg := Config{ServiceCIDRs: []netip.Prefix{mustPrefix("10.200.0.0/16")}}
	second := runWith(t, cfg, first.State, svc("web"))
	if ip := findService(t, second, "default", "web").Spec.ClusterIP; !cfg.ServiceCIDRs[0].Contains(mustAddr(ip)) {
		t.Errorf("clusterIP %s is outside the new range", ip)
	}
	if ip := findService(t, second, "default", "kubernetes").Spec.ClusterIP; ip != "10.200.0.1" {
		t.Errorf("kubernetes clusterIP %s, want 10.200.0.1", ip)
	}
}

func TestInvalidConfig(t *testing.T) {
	prev := run(t, svc("web")).State
	cfg := Config{ServiceCIDRs: []netip.Prefix{mustPrefix("10.0.0.0/24"), mustPrefix("10.1.0.0/24")}}
	res := Reconcile(cfg, toObjects(svc("web")), prev, testNow)
	if len(res.Services) != 0 || len(res.Errors) != 1 || !errors.Is(res.Errors[0], ErrInvalidConfig) {
		t.Errorf("services %d errors %v, want every Service left out with ErrInvalidConfig", len(res.Services), errorStrings(res))
	}
	if !cmp.Equal(res.State, prev) {
		t.Errorf("an invalid config changed the State")
	}
}

// TestPriorNodePortsGiveWayToRequests: a node port the previous State gave a
// Service port is not claimed again when the user now asks for a node port
// for that port number (another protocol's entry shares it), nor when the
// user now asks for that node port on another entry of the Service.
func TestPriorNodePortsGiveWayToRequests(t *testing.T) {
	prev := State{Services: map[string]ServiceAlloc{
		"default/web": {ClusterIPs: []string{"10.96.0.50"}, NodePorts: map[string]int32{"UDP/80": 30999, "TCP/81": 30080}},
	}}
	web := svc("web", withType(corev1.ServiceTypeNodePort), withPorts(
		corev1.ServicePort{Name: "tcp", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080},
		corev1.ServicePort{Name: "udp", Port: 80, Protocol: corev1.ProtocolUDP},
		corev1.ServicePort{Name: "alt", Port: 81, Protocol: corev1.ProtocolTCP},
	))
	res := runWith(t, DefaultConfig(), prev, web)
	got := findService(t, res, "default", "web")
	if tcp, udp, alt := got.Spec.Ports[0].NodePort, got.Spec.Ports[1].NodePort, got.Spec.Ports[2].NodePort; tcp != 30080 || udp != 30080 || alt == 30080 || alt == 0 {
		t.Errorf("node ports TCP/80 %d, UDP/80 %d, TCP/81 %d; want 30080, 30080 (shared with the request) and another", tcp, udp, alt)
	}
	if got.Spec.ClusterIP != "10.96.0.50" {
		t.Errorf("ClusterIP %s, want the prior 10.96.0.50", got.Spec.ClusterIP)
	}
}
