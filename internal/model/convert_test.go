package model

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/ipfamily"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestServiceFromAPI(t *testing.T) {
	proxy := corev1.LoadBalancerIPModeProxy
	local := corev1.ServiceInternalTrafficPolicyLocal
	in := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "my-nginx", Labels: map[string]string{"run": "my-nginx"}},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeLoadBalancer,
			ClusterIP:  "10.106.189.218",
			ClusterIPs: []string{"10.106.189.218", "fd00:96::12"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web"), NodePort: 31428},
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 31000},
			},
			ExternalIPs:                   []string{"172.26.236.200"},
			LoadBalancerSourceRanges:      []string{"172.26.236.0/24", "10.1.2.3"},
			ExternalTrafficPolicy:         corev1.ServiceExternalTrafficPolicyLocal,
			InternalTrafficPolicy:         &local,
			HealthCheckNodePort:           32000,
			SessionAffinity:               corev1.ServiceAffinityClientIP,
			AllocateLoadBalancerNodePorts: ptr.To(false),
			LoadBalancerClass:             ptr.To("svcnet.io/lb"),
			TrafficDistribution:           ptr.To("PreferClose"),
			Selector:                      map[string]string{"run": "my-nginx"},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "172.26.236.180"}, {IP: "172.26.236.181", IPMode: &proxy}, {Hostname: "lb.example"},
		}}},
	}
	got, err := ServiceFromAPI(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &Service{
		Namespace: "default", Name: "my-nginx", Type: ServiceTypeLoadBalancer,
		ClusterIPs: addrs("10.106.189.218", "fd00:96::12"), IPFamilies: []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6},
		Ports: []ServicePort{
			{Name: "http", Protocol: ProtocolTCP, Port: 80, TargetPortName: "web", NodePort: 31428},
			{Name: "dns", Protocol: ProtocolUDP, Port: 53, TargetPort: 53, NodePort: 31000},
		},
		ExternalIPs: addrs("172.26.236.200"),
		LoadBalancerIngress: []LoadBalancerIngress{
			{IP: netip.MustParseAddr("172.26.236.180"), IPMode: IPModeVIP},
			{IP: netip.MustParseAddr("172.26.236.181"), IPMode: IPModeProxy},
			{Hostname: "lb.example", IPMode: IPModeVIP},
		},
		LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("172.26.236.0/24"), netip.MustParsePrefix("10.1.2.3/32")},
		LoadBalancerClass:        "svcnet.io/lb",
		ExternalTrafficPolicy:    TrafficPolicyLocal, InternalTrafficPolicy: TrafficPolicyLocal,
		HealthCheckNodePort: 32000, AffinityClientIP: true, AffinityTimeout: 3 * time.Hour,
		TrafficDistribution: "PreferClose",
		Selector:            map[string]string{"run": "my-nginx"}, Labels: map[string]string{"run": "my-nginx"},
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Fatalf("ServiceFromAPI (-want +got):\n%s", d)
	}
}

func TestServiceFromAPIDefaultsAndErrors(t *testing.T) {
	headless, err := ServiceFromAPI(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "h"},
		Spec: corev1.ServiceSpec{ClusterIP: "None", SessionAffinity: corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !headless.Headless || len(headless.ClusterIPs) != 0 || headless.Type != ServiceTypeClusterIP ||
		headless.ExternalTrafficPolicy != "" || headless.InternalTrafficPolicy != TrafficPolicyCluster || headless.AffinityTimeout != time.Minute ||
		!headless.AllocateLoadBalancerNodePorts {
		t.Fatalf("headless defaults wrong: %+v", headless)
	}
	np, _ := ServiceFromAPI(&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.5"}})
	if np.ExternalTrafficPolicy != TrafficPolicyCluster {
		t.Fatalf("NodePort externalTrafficPolicy = %q, want Cluster", np.ExternalTrafficPolicy)
	}
	for field, s := range map[string]corev1.ServiceSpec{
		"spec.clusterIPs[0]":               {ClusterIP: "10.96.0.300"},
		"spec.externalIPs[0]":              {ExternalIPs: []string{"x"}},
		"spec.loadBalancerSourceRanges[0]": {LoadBalancerSourceRanges: []string{"1.2.3.4/40"}},
	} {
		_, err := ServiceFromAPI(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bad"}, Spec: s})
		if err == nil || !strings.Contains(err.Error(), "service a/bad: "+field) {
			t.Errorf("%s: error %v, want one naming service a/bad and the field", field, err)
		}
	}
}

func TestEndpointSliceFromAPIConditions(t *testing.T) {
	in := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-x", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", LabelHeadless: ""},
			Annotations: map[string]string{TriggerTimeAnnotation: "2026-11-21T10:00:00Z"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"192.168.1.2"}}, // unset: ready, serving
			{Addresses: []string{"192.168.1.3"}, Conditions: discoveryv1.EndpointConditions{Terminating: ptr.To(true)}}, // unset ready + terminating: not ready
			{Addresses: []string{"192.168.1.4"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
			{Addresses: []string{"192.168.1.5"}, NodeName: ptr.To("node1"), Zone: ptr.To("z1"), Hostname: ptr.To("h5"),
				Hints:     &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z1"}}, ForNodes: []discoveryv1.ForNode{{Name: "node1"}}},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p5", UID: "u5"}},
		},
	}
	got, ok, err := EndpointSliceFromAPI(in)
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	type cond struct{ R, S, T bool }
	var conds []cond
	for _, e := range got.Endpoints {
		conds = append(conds, cond{e.Ready, e.Serving, e.Terminating})
	}
	if want := []cond{{true, true, false}, {false, false, true}, {false, true, true}, {true, true, false}}; !cmp.Equal(conds, want) {
		t.Fatalf("conditions = %v, want %v", conds, want)
	}
	e := got.Endpoints[3]
	if e.NodeName != "node1" || e.Zone != "z1" || e.Hostname != "h5" || !cmp.Equal(e.HintZones, []string{"z1"}) ||
		!cmp.Equal(e.HintNodes, []string{"node1"}) || *e.TargetRef != (ObjectRef{"Pod", "default", "p5", "u5"}) {
		t.Fatalf("endpoint 3 = %+v", e)
	}
	if got.Service != "web" || !got.Headless || got.Ports[0].Protocol != ProtocolTCP || got.TriggerTime == 0 {
		t.Fatalf("slice = %+v", got)
	}
	if _, ok, _ := EndpointSliceFromAPI(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{discoveryv1.LabelServiceName: "x"}}, AddressType: discoveryv1.AddressTypeFQDN}); ok {
		t.Fatal("FQDN slice represented")
	}
	if _, ok, _ := EndpointSliceFromAPI(&discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}); ok {
		t.Fatal("slice without service-name label represented")
	}
}

func TestNodeAndPodFromAPI(t *testing.T) {
	n, err := NodeFromAPI(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", Labels: map[string]string{LabelTopologyZone: "z"}},
		Spec: corev1.NodeSpec{PodCIDR: "192.168.1.0/24"},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node1"}, {Type: corev1.NodeExternalIP, Address: "1.2.3.4"}, {Type: corev1.NodeInternalIP, Address: "172.26.236.177"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if n.Terminating || n.TaintKeys != nil {
		t.Errorf("plain node: terminating %v taints %q, want neither", n.Terminating, n.TaintKeys)
	}
	if !n.Ready || n.Zone() != "z" || !cmp.Equal(n.PodCIDRs, []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })) ||
		!cmp.Equal(n.IPs(), addrs("172.26.236.177", "1.2.3.4"), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
		t.Fatalf("node = %+v ips %v", n, n.IPs())
	}
	now := metav1.Now()
	n, err = NodeFromAPI(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2", DeletionTimestamp: &now, Finalizers: []string{"example.com/hold"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule},
			{Key: "ToBeDeletedByClusterAutoscaler", Value: "1700000000", Effect: corev1.TaintEffectNoSchedule},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Terminating || !cmp.Equal(n.TaintKeys, []string{"node.kubernetes.io/unschedulable", "ToBeDeletedByClusterAutoscaler"}) ||
		!n.HasTaint("ToBeDeletedByClusterAutoscaler") || n.HasTaint("other") {
		t.Errorf("node being deleted = %+v", n)
	}
	p, err := PodFromAPI(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "d", Name: "p", DeletionTimestamp: &now},
		Spec:   corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80, HostPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "192.168.1.2", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Ready || !p.Terminating || p.Phase != "Running" || len(p.IPs) != 1 ||
		p.ContainerPorts[0] != (ContainerPort{Container: "c", Name: "http", Protocol: ProtocolTCP, ContainerPort: 80, HostPort: 8080}) {
		t.Fatalf("pod = %+v", p)
	}
	if _, err := PodFromAPI(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "d", Name: "p"}, Status: corev1.PodStatus{PodIP: "nope"}}); err == nil || !strings.Contains(err.Error(), "pod d/p: status.podIPs[0]") {
		t.Fatalf("bad pod IP error = %v", err)
	}
}
