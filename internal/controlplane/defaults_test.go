package controlplane

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// defaulted is the part of a reconciled Service that defaulting decides.
type defaulted struct {
	Namespace       string
	Type            corev1.ServiceType
	SessionAffinity corev1.ServiceAffinity
	AffinityTimeout *int32
	ETP             corev1.ServiceExternalTrafficPolicy
	ITP             *corev1.ServiceInternalTrafficPolicy
	AllocateLB      *bool
	Policy          *corev1.IPFamilyPolicy
	Families        []corev1.IPFamily
	ClusterIPFams   []corev1.IPFamily // family of each allocated clusterIP ("None" kept as is)
	Ports           []string          // "protocol port->targetPort nodePort?"
	HealthCheck     bool
}

func project(s *corev1.Service) defaulted {
	d := defaulted{
		Namespace: s.Namespace, Type: s.Spec.Type, SessionAffinity: s.Spec.SessionAffinity,
		ETP: s.Spec.ExternalTrafficPolicy, ITP: s.Spec.InternalTrafficPolicy,
		AllocateLB: s.Spec.AllocateLoadBalancerNodePorts, Policy: s.Spec.IPFamilyPolicy,
		Families: s.Spec.IPFamilies, HealthCheck: s.Spec.HealthCheckNodePort != 0,
	}
	if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil {
		d.AffinityTimeout = c.ClientIP.TimeoutSeconds
	}
	for _, ip := range s.Spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			d.ClusterIPFams = append(d.ClusterIPFams, "None")
			continue
		}
		d.ClusterIPFams = append(d.ClusterIPFams, familyOf(ip))
	}
	for _, p := range s.Spec.Ports {
		np := ""
		if p.NodePort != 0 {
			np = " nodePort"
		}
		d.Ports = append(d.Ports, fmt.Sprintf("%s %d->%s%s", p.Protocol, p.Port, p.TargetPort.String(), np))
	}
	return d
}

var (
	v4         = corev1.IPv4Protocol
	v6         = corev1.IPv6Protocol
	single     = ptr(corev1.IPFamilyPolicySingleStack)
	prefer     = ptr(corev1.IPFamilyPolicyPreferDualStack)
	require    = ptr(corev1.IPFamilyPolicyRequireDualStack)
	itpCluster = ptr(corev1.ServiceInternalTrafficPolicyCluster)
	dualStack  = Config{ServiceCIDRs: []netip.Prefix{mustPrefix("10.96.0.0/12"), mustPrefix("fd00:96::/108")}}
)

func TestDefaulting(t *testing.T) {
	base := defaulted{
		Namespace: "default", Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
		ITP: itpCluster, Policy: single, Families: []corev1.IPFamily{v4}, ClusterIPFams: []corev1.IPFamily{v4},
		Ports: []string{"TCP 80->80"},
	}
	with := func(f func(*defaulted)) defaulted {
		d := base
		f(&d)
		return d
	}
	tests := []struct {
		name string
		cfg  Config
		svc  *corev1.Service
		want defaulted
	}{
		{"empty type is ClusterIP", DefaultConfig(), svc("a"), base},
		{"namespace kept", DefaultConfig(), svc("a", inNamespace("prod")), with(func(d *defaulted) { d.Namespace = "prod" })},
		{"named targetPort kept, UDP kept", DefaultConfig(),
			svc("a", withPorts(tcp("web", 80, intstr.FromString("http")), corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})),
			with(func(d *defaulted) { d.Ports = []string{"TCP 80->http", "UDP 53->53"} })},
		{"ClientIP gets 10800s", DefaultConfig(),
			svc("a", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }),
			with(func(d *defaulted) {
				d.SessionAffinity, d.AffinityTimeout = corev1.ServiceAffinityClientIP, ptr(int32(10800))
			})},
		{"ClientIP timeout kept", DefaultConfig(),
			svc("a", func(s *corev1.Service) {
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
			}),
			with(func(d *defaulted) {
				d.SessionAffinity, d.AffinityTimeout = corev1.ServiceAffinityClientIP, ptr(int32(60))
			})},
		{"None drops affinity config", DefaultConfig(),
			svc("a", func(s *corev1.Service) {
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
			}), base},
		{"NodePort gets ETP Cluster and a node port", DefaultConfig(), svc("a", withType(corev1.ServiceTypeNodePort)),
			with(func(d *defaulted) {
				d.Type, d.ETP, d.Ports = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyCluster, []string{"TCP 80->80 nodePort"}
			})},
		{"LoadBalancer allocates node ports by default", DefaultConfig(), svc("a", withType(corev1.ServiceTypeLoadBalancer)),
			with(func(d *defaulted) {
				d.Type, d.ETP, d.AllocateLB = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster, ptr(true)
				d.Ports = []string{"TCP 80->80 nodePort"}
			})},
		{"LoadBalancer without node ports", DefaultConfig(),
			svc("a", withType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr(false) }),
			with(func(d *defaulted) {
				d.Type, d.ETP, d.AllocateLB = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster, ptr(false)
			})},
		{"LoadBalancer Local gets a health check port", DefaultConfig(),
			svc("a", withType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			}),
			with(func(d *defaulted) {
				d.Type, d.ETP, d.AllocateLB = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal, ptr(true)
				d.Ports, d.HealthCheck = []string{"TCP 80->80 nodePort"}, true
			})},
		{"ClusterIP with externalIPs gets ETP Cluster", DefaultConfig(),
			svc("a", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"172.26.236.50"} }),
			with(func(d *defaulted) { d.ETP = corev1.ServiceExternalTrafficPolicyCluster })},
		{"ExternalName gets no ITP and no IP fields", DefaultConfig(),
			svc("a", withType(corev1.ServiceTypeExternalName), noSelector, func(s *corev1.Service) { s.Spec.ExternalName = "example.com" }),
			defaulted{Namespace: "default", Type: corev1.ServiceTypeExternalName, SessionAffinity: corev1.ServiceAffinityNone, Ports: []string{"TCP 80->80"}}},
		{"headless with selector is SingleStack", DefaultConfig(), svc("a", withClusterIP("None")),
			with(func(d *defaulted) { d.ClusterIPFams = []corev1.IPFamily{"None"} })},
		{"headless without selector is RequireDualStack even on single-stack", DefaultConfig(), svc("a", withClusterIP("None"), noSelector),
			with(func(d *defaulted) {
				d.Policy, d.Families, d.ClusterIPFams = require, []corev1.IPFamily{v4, v6}, []corev1.IPFamily{"None"}
			})},
		{"PreferDualStack on single-stack", DefaultConfig(), svc("a", withPolicy(*prefer)),
			with(func(d *defaulted) { d.Policy = prefer })},
		{"PreferDualStack on dual-stack", dualStack, svc("a", withPolicy(*prefer)),
			with(func(d *defaulted) {
				d.Policy, d.Families, d.ClusterIPFams = prefer, []corev1.IPFamily{v4, v6}, []corev1.IPFamily{v4, v6}
			})},
		{"SingleStack IPv6 on dual-stack", dualStack, svc("a", withPolicy(*single, v6)),
			with(func(d *defaulted) { d.Families, d.ClusterIPFams = []corev1.IPFamily{v6}, []corev1.IPFamily{v6} })},
		{"RequireDualStack IPv6 first", dualStack, svc("a", withPolicy(*require, v6)),
			with(func(d *defaulted) {
				d.Policy, d.Families, d.ClusterIPFams = require, []corev1.IPFamily{v6, v4}, []corev1.IPFamily{v6, v4}
			})},
		{"family inferred from requested IPv6 clusterIP", dualStack, svc("a", withClusterIP("fd00:96::5")),
			with(func(d *defaulted) { d.Families, d.ClusterIPFams = []corev1.IPFamily{v6}, []corev1.IPFamily{v6} })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := runWith(t, tc.cfg, State{}, tc.svc)
			ns := tc.svc.Namespace
			if ns == "" {
				ns = "default"
			}
			got := findService(t, res, ns, tc.svc.Name)
			if diff := cmp.Diff(tc.want, project(got)); diff != "" {
				t.Errorf("defaulted Service (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceMetadata(t *testing.T) {
	in := svc("web", func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
		s.UID = "user-given"
		s.ResourceVersion = "42"
	})
	orig := in.DeepCopy()
	res := run(t, in)
	got := findService(t, res, "default", "web")
	if diff := cmp.Diff(orig, in); diff != "" {
		t.Errorf("Reconcile modified its input (-before +after):\n%s", diff)
	}
	if got.APIVersion != "v1" || got.Kind != "Service" {
		t.Errorf("TypeMeta = %v, want v1 Service", got.TypeMeta)
	}
	if got.UID == "" || got.UID == "user-given" {
		t.Errorf("UID = %q, want one made by the control plane", got.UID)
	}
	if !got.CreationTimestamp.Equal(&metav1.Time{Time: testNow}) {
		t.Errorf("creationTimestamp = %v, want %v", got.CreationTimestamp, testNow)
	}
	if got.ResourceVersion != "" || len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("resourceVersion %q and status %v survived the create", got.ResourceVersion, got.Status)
	}
	if st := res.State.Services["default/web"]; st.UID != string(got.UID) || !st.Created.Equal(testNow) {
		t.Errorf("State entry %+v does not keep uid %s and creation %v", st, got.UID, testNow)
	}
	// A later run keeps uid and creationTimestamp from the State.
	again := Reconcile(DefaultConfig(), toObjects(in), res.State, testNow.Add(time.Hour))
	got2 := findService(t, again, "default", "web")
	if got2.UID != got.UID || !got2.CreationTimestamp.Equal(&got.CreationTimestamp) {
		t.Errorf("second run: uid %s created %v, want %s %v", got2.UID, got2.CreationTimestamp, got.UID, got.CreationTimestamp)
	}
}

func TestKubernetesService(t *testing.T) {
	res := run(t)
	got := findService(t, res, "default", "kubernetes")
	want := corev1.ServiceSpec{
		Ports:                 []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(6443)}},
		ClusterIP:             "10.96.0.1",
		ClusterIPs:            []string{"10.96.0.1"},
		Type:                  corev1.ServiceTypeClusterIP,
		SessionAffinity:       corev1.ServiceAffinityNone,
		IPFamilies:            []corev1.IPFamily{v4},
		IPFamilyPolicy:        single,
		InternalTrafficPolicy: itpCluster,
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("default/kubernetes spec (-want +got):\n%s", diff)
	}
	if len(slicesOf(res, "default", "kubernetes")) != 0 {
		t.Errorf("default/kubernetes has no selector and must get no controller slices")
	}

	// Defined in the manifests: that one is used, allocated like any other.
	mine := svc("kubernetes", noSelector, withPorts(tcp("https", 443, intstr.FromInt32(8443))))
	res = run(t, mine)
	got = findService(t, res, "default", "kubernetes")
	if got.Spec.Ports[0].TargetPort.IntVal != 8443 || got.Labels["provider"] != "" {
		t.Errorf("the manifest's default/kubernetes was not used: %+v", got)
	}

	// On IPv6 the first usable address of the range.
	res = runWith(t, Config{ServiceCIDRs: []netip.Prefix{mustPrefix("fd00:96::/108")}}, State{})
	if got := findService(t, res, "default", "kubernetes"); got.Spec.ClusterIP != "fd00:96::1" {
		t.Errorf("IPv6 default/kubernetes clusterIP = %s, want fd00:96::1", got.Spec.ClusterIP)
	}
}
