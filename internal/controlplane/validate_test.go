//lint:file-ignore SA1019 legacy v1 Endpoints are read and mirrored on purpose, as kube-controller-manager does

package controlplane

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Messages of k8s.io/apimachinery, as the apiserver prints them.
const (
	dnsLabelMsg     = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	dnsSubdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	labelValueMsg   = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
	labelKeyNameMsg = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	badIPMsg        = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
	badCIDRMsg      = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
)

func TestValidationErrors(t *testing.T) {
	lb := func(mut ...func(*corev1.Service)) *corev1.Service {
		return svc("web", append([]func(*corev1.Service){withType(corev1.ServiceTypeLoadBalancer)}, mut...)...)
	}
	slice := func(at discoveryv1.AddressType, addrs ...string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "s"}, AddressType: at,
			Endpoints: []discoveryv1.Endpoint{{Addresses: addrs}},
		}
	}
	tests := []struct {
		name string
		cfg  Config
		obj  runtimeObject
		want string
	}{
		// Services: metadata.
		{"service name", DefaultConfig(), svc("Web_1"),
			`Service default/Web_1: metadata.name: Invalid value: "Web_1": ` + dnsLabelMsg},
		{"namespace name", DefaultConfig(), svc("web", inNamespace("Prod")),
			`Service Prod/web: metadata.namespace: Invalid value: "Prod": ` + dnsLabelMsg},
		// Services: ports.
		{"port out of range", DefaultConfig(), svc("web", withPorts(tcp("a", 80, intstr.FromInt32(80)), tcp("b", 70000, intstr.FromInt32(8080)))),
			"Service default/web: spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive"},
		{"port out of range defaults targetPort", DefaultConfig(), svc("web", withPorts(corev1.ServicePort{Port: 0})),
			"Service default/web: [spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive, spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive]"},
		{"duplicate port", DefaultConfig(), svc("web", withPorts(tcp("a", 80, intstr.FromInt32(80)), tcp("b", 80, intstr.FromInt32(81)))),
			`Service default/web: spec.ports[1]: Duplicate value: {"Name":"","Protocol":"TCP","AppProtocol":null,"Port":80,"TargetPort":0,"NodePort":0}`},
		{"same port on TCP and UDP is fine, duplicate name is not", DefaultConfig(),
			svc("web", withPorts(tcp("dns", 53, intstr.FromInt32(53)), corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})),
			`Service default/web: spec.ports[1].name: Duplicate value: "dns"`},
		{"names required with several ports", DefaultConfig(), svc("web", withPorts(corev1.ServicePort{Port: 80}, corev1.ServicePort{Port: 81})),
			"Service default/web: [spec.ports[0].name: Required value, spec.ports[1].name: Required value]"},
		{"port name", DefaultConfig(), svc("web", withPorts(tcp("HTTP", 80, intstr.FromInt32(80)))),
			`Service default/web: spec.ports[0].name: Invalid value: "HTTP": ` + dnsLabelMsg},
		{"protocol", DefaultConfig(), svc("web", withPorts(corev1.ServicePort{Port: 80, Protocol: "HTTP"})),
			`Service default/web: spec.ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"`},
		{"named targetPort", DefaultConfig(), svc("web", withPorts(tcp("a", 80, intstr.FromString("--1")))),
			`Service default/web: [spec.ports[0].targetPort: Invalid value: "--1": must contain at least one letter (a-z), spec.ports[0].targetPort: Invalid value: "--1": must not contain consecutive hyphens, spec.ports[0].targetPort: Invalid value: "--1": must not begin or end with a hyphen]`},
		{"no ports", DefaultConfig(), svc("web", withPorts()),
			"Service default/web: spec.ports: Required value"},
		{"nodePort on ClusterIP", DefaultConfig(), svc("web", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 }),
			"Service default/web: spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"},
		{"nodePort out of range", DefaultConfig(), svc("web", withType(corev1.ServiceTypeNodePort), func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 29999 }),
			"Service default/web: spec.ports[0].nodePort: Invalid value: 29999: provided port is not in the valid range. The range of valid ports is 30000-32767"},
		// Services: cluster IPs and families.
		{"clusterIP not an IP", DefaultConfig(), svc("web", withClusterIP("10.96.0.300")),
			`Service default/web: spec.clusterIPs[0]: Invalid value: "10.96.0.300": ` + badIPMsg},
		{"clusterIP leading zeros", DefaultConfig(), svc("web", withClusterIP("10.96.0.010")),
			`Service default/web: spec.clusterIPs[0]: Invalid value: "10.96.0.010": must not have leading 0s`},
		{"clusterIP and clusterIPs differ", DefaultConfig(), svc("web", withClusterIP("10.96.0.5"), func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.6"} }),
			"Service default/web: spec.clusterIPs: Invalid value: [\"10.96.0.6\"]: first value must match `clusterIP`"},
		{"clusterIP outside the range", DefaultConfig(), svc("web", withClusterIP("10.0.0.1")),
			`Service default/web: spec.clusterIPs: Invalid value: ["10.0.0.1"]: failed to allocate IP 10.0.0.1: the provided IP (10.0.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12`},
		{"IPv6 clusterIP on an IPv4 cluster", DefaultConfig(), svc("web", withClusterIP("fd00::1")),
			`Service default/web: spec.clusterIPs[0]: Invalid value: ["fd00::1"]: IPv6 is not configured on this cluster`},
		{"RequireDualStack on single-stack", DefaultConfig(), svc("web", withPolicy(*require)),
			`Service default/web: spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services`},
		{"IPv6 family on an IPv4 cluster", DefaultConfig(), svc("web", withPolicy(*single, v6)),
			`Service default/web: spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster`},
		{"two IPs of one family", dualStack, svc("web", withPolicy(*require), withClusterIP("10.96.0.5"), func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.5", "10.96.0.6"} }),
			`Service default/web: spec.clusterIPs: Invalid value: ["10.96.0.5","10.96.0.6"]: may specify no more than one IP for each IP family`},
		{"SingleStack with two IPs", dualStack, svc("web", withPolicy(*single), withClusterIP("10.96.0.5"), func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.5", "fd00:96::5"} }),
			`Service default/web: spec.ipFamilyPolicy: Invalid value: "SingleStack": must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified`},
		{"unknown family", DefaultConfig(), svc("web", withPolicy(*single, "IPv5")),
			`Service default/web: spec.ipFamilies[0]: Unsupported value: "IPv5": supported values: "IPv4", "IPv6"`},
		{"headless NodePort", DefaultConfig(), svc("web", withType(corev1.ServiceTypeNodePort), withClusterIP("None")),
			`Service default/web: spec.clusterIPs[0]: Invalid value: "None": may not be set to 'None' for NodePort services`},
		// Services: selector.
		{"selector value", DefaultConfig(), svc("web", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "no spaces"} }),
			`Service default/web: spec.selector: Invalid value: "no spaces": ` + labelValueMsg},
		{"empty selector key", DefaultConfig(), svc("web", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"": "x"} }),
			`Service default/web: [spec.selector: Invalid value: "": name part must be non-empty, spec.selector: Invalid value: "": ` + labelKeyNameMsg + `]`},
		// Services: type-specific rules.
		{"type", DefaultConfig(), svc("web", withType("Foo")),
			`Service default/web: spec.type: Unsupported value: "Foo": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`},
		{"ExternalName without name", DefaultConfig(), svc("web", withType(corev1.ServiceTypeExternalName)),
			"Service default/web: spec.externalName: Required value"},
		{"ExternalName with bad name", DefaultConfig(), svc("web", withType(corev1.ServiceTypeExternalName), func(s *corev1.Service) { s.Spec.ExternalName = "bad_name." }),
			`Service default/web: spec.externalName: Invalid value: "bad_name": ` + dnsSubdomainMsg},
		{"ExternalName with clusterIP", DefaultConfig(), svc("web", withType(corev1.ServiceTypeExternalName), withClusterIP("10.96.0.5"), func(s *corev1.Service) { s.Spec.ExternalName = "example.com" }),
			"Service default/web: spec.clusterIPs: Forbidden: may not be set for ExternalName services"},
		{"source range CIDR", DefaultConfig(), lb(func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/33", "10.0.0.1/8"} }),
			`Service default/web: [spec.LoadBalancerSourceRanges[0]: Invalid value: "10.0.0.0/33": ` + badCIDRMsg +
				`, spec.LoadBalancerSourceRanges[1]: Invalid value: "10.0.0.1/8": must not have bits set beyond the prefix length]`},
		{"source ranges on ClusterIP", DefaultConfig(), svc("web", func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} }),
			"Service default/web: spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'"},
		{"externalTrafficPolicy Local on ClusterIP", DefaultConfig(), svc("web", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }),
			`Service default/web: spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible services`},
		{"healthCheckNodePort without Local", DefaultConfig(), svc("web", withType(corev1.ServiceTypeNodePort), func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 30100 }),
			"Service default/web: spec.healthCheckNodePort: Invalid value: 30100: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"},
		{"allocateLoadBalancerNodePorts on NodePort", DefaultConfig(), svc("web", withType(corev1.ServiceTypeNodePort), func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr(true) }),
			"Service default/web: spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'"},
		{"affinity timeout 0", DefaultConfig(), svc("web", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(0))}}
		}), "Service default/web: spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than 86400"},
		{"affinity timeout above a day", DefaultConfig(), svc("web", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(86401))}}
		}), "Service default/web: spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 86401: must be greater than 0 and less than 86400"},
		{"sessionAffinity", DefaultConfig(), svc("web", func(s *corev1.Service) { s.Spec.SessionAffinity = "Sticky" }),
			`Service default/web: spec.sessionAffinity: Unsupported value: "Sticky": supported values: "ClientIP", "None"`},
		{"externalIP loopback", DefaultConfig(), svc("web", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"127.0.0.1"} }),
			`Service default/web: spec.externalIPs[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`},
		{"trafficDistribution", DefaultConfig(), svc("web", func(s *corev1.Service) { s.Spec.TrafficDistribution = ptr("Random") }),
			`Service default/web: spec.trafficDistribution: Unsupported value: "Random": supported values: "PreferClose", "PreferSameZone", "PreferSameNode"`},
		// Pods.
		{"pod IP", DefaultConfig(), pod("p", "web", "192.168.1.300"),
			`Pod default/p: status.podIPs[0]: Invalid value: "192.168.1.300": ` + badIPMsg},
		{"lone podIP", DefaultConfig(), func() runtimeObject { p := pod("p", "web"); p.Status.PodIP = "fd00::zz"; return p }(),
			`Pod default/p: status.podIPs[0]: Invalid value: "fd00::zz": ` + badIPMsg},
		{"two pod IPs of one family", DefaultConfig(), pod("p", "web", "192.168.1.1", "192.168.1.2"),
			`Pod default/p: status.podIPs: Invalid value: [{"IP":"192.168.1.1"},{"IP":"192.168.1.2"}]: may specify no more than one IP for each IP family`},
		{"container port", DefaultConfig(), withContainerPort(pod("p", "web", "192.168.1.1"), "http", 0),
			"Pod default/p: spec.containers[0].ports[0].containerPort: Required value"},
		{"pod name", DefaultConfig(), pod("Pod_1", "web", "192.168.1.1"),
			`Pod default/Pod_1: metadata.name: Invalid value: "Pod_1": ` + dnsSubdomainMsg},
		{"pod subdomain", DefaultConfig(), func() runtimeObject { p := pod("p", "web"); p.Spec.Subdomain = "a.b"; return p }(),
			`Pod default/p: spec.subdomain: Invalid value: "a.b": must not contain dots`},
		// Nodes and Namespaces.
		{"node podCIDR", DefaultConfig(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/33"}},
			`Node n1: spec.podCIDRs[0]: Invalid value: "10.0.0.0/33": ` + badCIDRMsg},
		{"node podCIDRs of one family", DefaultConfig(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.0.0.0/24", "10.0.1.0/24"}}},
			`Node n1: spec.podCIDRs: Invalid value: ["10.0.0.0/24","10.0.1.0/24"]: may specify no more than one CIDR for each IP family`},
		{"node with namespace", DefaultConfig(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "default"}},
			"Node default/n1: metadata.namespace: Forbidden: not allowed on this type"},
		{"namespace name", DefaultConfig(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}},
			`Namespace a.b: metadata.name: Invalid value: "a.b": must not contain dots`},
		// EndpointSlices.
		{"slice address type", DefaultConfig(), slice("IP", "10.1.0.1"),
			`EndpointSlice default/s: addressType: Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"`},
		{"slice address of the other family", DefaultConfig(), slice(discoveryv1.AddressTypeIPv4, "fd00::1"),
			`EndpointSlice default/s: endpoints[0].addresses: Invalid value: "fd00::1": must be an IPv4 address`},
		{"slice IPv6 not canonical", DefaultConfig(), slice(discoveryv1.AddressTypeIPv6, "FD00::1"),
			`EndpointSlice default/s: endpoints[0].addresses[0]: Invalid value: "FD00::1": must be in canonical form ("fd00::1")`},
		{"slice endpoint without address", DefaultConfig(), slice(discoveryv1.AddressTypeIPv4),
			"EndpointSlice default/s: endpoints[0].addresses: Required value: must contain at least 1 address"},
		{"slice ports", DefaultConfig(), func() runtimeObject {
			s := slice(discoveryv1.AddressTypeIPv4, "10.1.0.1")
			s.Ports = []discoveryv1.EndpointPort{{Port: ptr(int32(80)), Protocol: ptr(corev1.Protocol("HTTP"))}, {Port: ptr(int32(81))}}
			return s
		}(), `EndpointSlice default/s: [ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP", ports[1].name: Duplicate value: ""]`},
		// Endpoints.
		{"endpoints IP", DefaultConfig(), legacyEndpoints("ep", corev1.EndpointSubset{Addresses: addrs("10.0.0.999")}),
			`Endpoints default/ep: [subsets[0].addresses[0].ip: Invalid value: "10.0.0.999": ` + badIPMsg +
				`, subsets[0].addresses[0].ip: Invalid value: "10.0.0.999": must be a valid IP address]`},
		{"endpoints subset without address", DefaultConfig(), legacyEndpoints("ep", corev1.EndpointSubset{}),
			"Endpoints default/ep: subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"},
		{"endpoints ports need names", DefaultConfig(), legacyEndpoints("ep", corev1.EndpointSubset{Addresses: addrs("10.0.0.9"), Ports: []corev1.EndpointPort{{Port: 80}, {Name: "b", Port: 81}}}),
			"Endpoints default/ep: subsets[0].ports[0].name: Required value"},
		// Objects the control plane does not take.
		{"unknown kind", DefaultConfig(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}},
			"ConfigMap default/cfg: unknown kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok := svc("fine")
			res := Reconcile(tc.cfg, []Object{{Origin: "bad.yaml", Obj: tc.obj}, {Origin: "ok.yaml", Obj: ok}}, State{}, testNow)
			if diff := cmp.Diff([]string{"bad.yaml: " + tc.want}, errorStrings(res)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			findService(t, res, "default", "fine") // the other object is still there
			for _, s := range res.Services {
				if s.Name == "web" {
					t.Errorf("the invalid Service is in the result")
				}
			}
		})
	}
}

func TestValidNames(t *testing.T) {
	// RelaxedServiceNameValidation (beta, on in v1.36): a Service name may start with a digit.
	res := run(t, svc("1web"), pod("p.with.dots", "web", "192.168.1.1"), node("node-1.example.com", ""))
	findService(t, res, "default", "1web")
	if len(res.Pods) != 1 || len(res.Nodes) != 1 {
		t.Errorf("pods %d nodes %d, want the DNS-subdomain names accepted", len(res.Pods), len(res.Nodes))
	}
}

func TestDuplicateObjects(t *testing.T) {
	objs := []Object{
		{Origin: "a.yaml", Obj: svc("web")},
		{Origin: "b.yaml#2", Obj: svc("web", withType(corev1.ServiceTypeNodePort))},
		{Origin: "c.yaml", Obj: pod("web", "web", "192.168.1.1")}, // another kind: not a duplicate
		{Origin: "d.yaml", Obj: svc("web", inNamespace("prod"))},
	}
	res := Reconcile(DefaultConfig(), objs, State{}, testNow)
	want := []string{"b.yaml#2: Service default/web: duplicate object: already defined in a.yaml"}
	if diff := cmp.Diff(want, errorStrings(res)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if !errors.Is(res.Errors[0], ErrDuplicate) {
		t.Errorf("error does not wrap ErrDuplicate")
	}
	if got := findService(t, res, "default", "web"); got.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("the second definition won")
	}
	findService(t, res, "prod", "web")
}

func TestNilObject(t *testing.T) {
	var typedNil *corev1.Service
	res := Reconcile(DefaultConfig(), []Object{{Origin: "x.yaml"}, {Origin: "y.yaml", Obj: typedNil}}, State{}, testNow)
	if len(res.Errors) != 2 || !errors.Is(res.Errors[0], ErrUnknownKind) || !errors.Is(res.Errors[1], ErrUnknownKind) {
		t.Errorf("errors = %v, want two unknown kinds", errorStrings(res))
	}
}
