package kube

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestDescribeParityWithKubectl: svcnet describe against a real API server
// prints what real kubectl (built from the Kubernetes module, tools/k8s)
// prints for the same Services, Pods and Nodes, byte for byte, events
// included, and svcnet get events what kubectl get events prints. The
// objects cover every line the describers write: labels and annotations
// (a long one, a multi-line one, kubectl's last-applied one, which is
// left out), each Service type, IP families, external IPs, ingress with
// its mode, named and unnamed ports with node ports, endpoints past three
// and not ready, affinity, traffic policies, health check node port,
// source ranges, traffic distribution; a running and a terminating Pod
// with probes, environment, resources and mounts; a Node with roles,
// taints, conditions, capacity and the pods on it, with and without a
// lease. Events are three days old, so that their ages read the same
// however long the two commands take.
func TestDescribeParityWithKubectl(t *testing.T) {
	p := newSideBySide(t)
	describeFixture(p.ctx, t, p.env.Client)

	for _, args := range [][]string{
		{"describe", "svc", "web"}, {"describe", "svc", "lb"}, {"describe", "service", "headless"},
		{"describe", "svc", "ext"}, {"describe", "svc", "bare"}, {"describe", "svc", "kubernetes"}, {"describe", "svc", "dual"},
		{"describe", "svc", "web", "lb"}, {"describe", "svc/web", "svc/bare"}, {"describe", "svc", "api", "-n", "other"},
		{"describe", "pod", "web-1"}, {"describe", "po", "web-2"}, {"describe", "pods/ending"},
		{"describe", "node", "node1"}, {"describe", "no", "node2"},
		{"describe", "svc", "nope"}, {"describe", "svc", "web", "nope"}, {"describe", "node", "nope"},
		{"describe", "svc"}, {"describe", "svc", "-l", "app=web"}, {"describe", "pods", "-A"}, {"describe", "nodes"},
		{"describe", "svc", "l"}, {"describe", "svc", "-n", "empty"}, {"describe", "svc", "lb", "--show-events=false"},
		{"describe", "svc", "web", "lb", "--show-events"}, {"describe", "svc", "-l", "app=nothing"},
		{"get", "events"}, {"get", "ev", "-o", "wide"}, {"get", "events", "-A"}, {"get", "events", "-o", "name"},
		{"get", "events", "-n", "other", "-o", "wide"},
	} {
		k, s := p.both(args...)
		kout, kerr, kcode, sout, serr, scode := k.stdout, k.stderr, k.code, s.stdout, s.stderr, s.code
		// A node's pods table ends with each pod's age, seconds here: the
		// two commands run up to a second apart.
		kout, sout = podAge.ReplaceAllString(kout, "${1}AGE"), podAge.ReplaceAllString(sout, "${1}AGE")
		if kout != sout || kcode != scode {
			t.Errorf("%q: kubectl exit %d, svcnet exit %d\nkubectl:\n%s\nsvcnet:\n%s\nsvcnet stderr: %s\n%s", args, kcode, scode, kout, sout, serr, lineDiff(kout, sout))
		}
		for _, line := range strings.Split(strings.TrimSpace(kerr), "\n") {
			line = strings.TrimPrefix(line, "error: ")
			// kubectl's discovery also knows events.k8s.io, whose events
			// svcnet does not list; its warning that "ev" could mean them is
			// not svcnet's to give.
			if strings.HasPrefix(line, `Warning: short name "ev" could also match`) {
				continue
			}
			if line != "" && !strings.Contains(serr, line) {
				t.Errorf("%q: kubectl says %q on stderr, svcnet:\n%s", args, line, serr)
			}
		}
	}
}

// podAge is the Age cell ending a row of describe node's Non-terminated
// Pods table (after the Memory Limits cell, "0 (0%)").
var podAge = regexp.MustCompile(`(?m)(\(\d+%\)\s+)\d+(s|m\d*s?|h\d*m?|d\d*h?)$`)

// lineDiff names the first line where a and b differ.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("first difference, line %d:\nkubectl: %q\nsvcnet:  %q", i+1, x, y)
		}
	}
	return ""
}

// describeFixture creates the objects TestDescribeParityWithKubectl
// describes.
func describeFixture(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}))
	long := strings.Repeat("x", 150)
	web := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "short", "long": long, "multi": "one\ntwo\n",
				corev1.LastAppliedConfigAnnotation: `{"kind":"Service"}`}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, SessionAffinity: corev1.ServiceAffinityClientIP,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal), TrafficDistribution: ptr.To("PreferClose"),
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web"), AppProtocol: ptr.To("http")},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}}},
	}
	lb := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lb"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			ExternalIPs: []string{"203.0.113.7", "203.0.113.8"}, LoadBalancerSourceRanges: []string{"10.0.0.0/8", "192.0.2.0/24"},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "headless"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"}}}
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}}
	bare := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bare"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 8080}}}}
	api := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "other"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "api"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	// dual-stack: a ClusterIP, a LoadBalancer IP and an EndpointSlice of each family.
	dual := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dual"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyPreferDualStack),
			Selector: map[string]string{"app": "dual"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	created := map[string]*corev1.Service{}
	for _, s := range []*corev1.Service{web, lb, headless, ext, bare, api, dual} {
		ns := s.Namespace
		if ns == "" {
			ns = "default"
		}
		got, err := c.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("Service %s: %v", s.Name, err)
		}
		created[s.Name] = got
	}
	got := created["lb"]
	got.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.26.236.180", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)},
		{IP: "172.26.236.181"}}
	must(c.CoreV1().Services("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}))
	got = created["dual"]
	got.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.26.236.182", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)},
		{IP: "fd00:26:236::b6", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
	must(c.CoreV1().Services("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}))

	ready := func(ip string, r *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: r}}
	}
	slices := []*discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-a", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{ready("192.168.1.10", ptr.To(true)), ready("192.168.1.11", nil),
				ready("192.168.1.12", ptr.To(false)), ready("192.168.1.13", ptr.To(true)), ready("192.168.1.14", ptr.To(true)),
				ready("192.168.1.15", ptr.To(true))},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)},
				{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(corev1.ProtocolUDP)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "lb-a", Labels: map[string]string{discoveryv1.LabelServiceName: "lb"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{ready("192.168.2.10", ptr.To(true))},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dual-a", Labels: map[string]string{discoveryv1.LabelServiceName: "dual"}},
			AddressType: discoveryv1.AddressTypeIPv6,
			Endpoints:   []discoveryv1.Endpoint{ready("fd00:192:168:2::a", ptr.To(true))},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dual-b", Labels: map[string]string{discoveryv1.LabelServiceName: "dual"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{ready("192.168.2.10", ptr.To(true))},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "headless-a", Labels: map[string]string{discoveryv1.LabelServiceName: "headless"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{ready("192.168.3.10", nil), ready("192.168.3.11", ptr.To(false))}},
	}
	for _, s := range slices {
		must(c.DiscoveryV1().EndpointSlices("default").Create(ctx, s, metav1.CreateOptions{}))
	}

	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "node1", Labels: map[string]string{"kubernetes.io/hostname": "node1",
			"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
			Spec: corev1.NodeSpec{PodCIDR: "192.168.1.0/24", PodCIDRs: []string{"192.168.1.0/24"},
				Taints: []corev1.Taint{{Key: "dedicated", Value: "net", Effect: corev1.TaintEffectNoSchedule},
					{Key: "spare", Effect: corev1.TaintEffectPreferNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "node2"}, Spec: corev1.NodeSpec{Unschedulable: true}},
	}
	then := metav1.NewTime(time.Now().Add(-72 * time.Hour).Truncate(time.Second))
	for _, n := range nodes {
		got, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Status = corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m"), corev1.ResourceMemory: resource.MustParse("3Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: then, LastTransitionTime: then,
				Reason: "KubeletReady", Message: "svcnet proxy is ready"}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.26.236.177"}, {Type: corev1.NodeHostName, Address: got.Name}},
			NodeInfo:  corev1.NodeSystemInfo{KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12", OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.36.3"},
		}
		must(c.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}))
	}
	must(c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "node1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node1"), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: then.Time}}}, metav1.CreateOptions{}))

	container := corev1.Container{Name: "web", Image: "svcnet-echo", Args: []string{"echo", "--port", "80"},
		Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 80}, {ContainerPort: 5353, Protocol: corev1.ProtocolUDP}},
		Env:   []corev1.EnvVar{{Name: "MODE", Value: "lab"}, {Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80)}}},
	}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{container},
				InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"sh", "-c", "true"}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-2", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "web", Image: "svcnet-echo"}},
				NodeSelector: map[string]string{"kubernetes.io/hostname": "node1"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ending", Finalizers: []string{"svcnet.io/test"}},
			Spec: corev1.PodSpec{NodeName: "node2", Containers: []corev1.Container{{Name: "web", Image: "svcnet-echo"}}}},
	}
	for _, p := range pods {
		got, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "172.26.236.177", PodIP: "192.168.1.10",
			PodIPs: []corev1.PodIP{{IP: "192.168.1.10"}}, StartTime: &then,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: then}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, RestartCount: 2, Image: "svcnet-echo",
				ImageID: "sha256:abc", ContainerID: "containerd://123",
				State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: then}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9, Reason: "Error", StartedAt: then, FinishedAt: then}}}}}
		must(c.CoreV1().Pods("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}))
	}
	must(nil, c.CoreV1().Pods("default").Delete(ctx, "ending", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](3600)}))
	t.Cleanup(func() {
		p, err := c.CoreV1().Pods("default").Get(context.Background(), "ending", metav1.GetOptions{})
		if err == nil {
			p.Finalizers = nil
			_, _ = c.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{})
		}
	})

	webSvc := created["web"]
	event := func(name, ns string, ref corev1.ObjectReference, typ, reason, msg string, count int32, age time.Duration) *corev1.Event {
		first := metav1.NewTime(then.Add(-age))
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, InvolvedObject: ref,
			Type: typ, Reason: reason, Message: msg, Count: count, FirstTimestamp: first, LastTimestamp: then,
			Source: corev1.EventSource{Component: "svcnet-lb-controller"}}
	}
	webRef := corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "web", UID: webSvc.UID, APIVersion: "v1"}
	lbRef := corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "lb", UID: created["lb"].UID, APIVersion: "v1"}
	podRef := corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1", APIVersion: "v1", FieldPath: "spec.containers{web}"}
	if p, err := c.CoreV1().Pods("default").Get(ctx, "web-1", metav1.GetOptions{}); err == nil {
		podRef.UID = p.UID
	}
	nodeRef := corev1.ObjectReference{Kind: "Node", Name: "node1", UID: "node1"}
	for _, e := range []*corev1.Event{
		event("lb.1", "default", lbRef, corev1.EventTypeWarning, "AllocationFailed", "no available IPs in pool lab", 1, 24*time.Hour),
		event("lb.2", "default", lbRef, corev1.EventTypeNormal, "IPAllocated", "Assigned IP 172.26.236.180 from pool lab", 3, time.Hour),
		event("web.1", "default", webRef, corev1.EventTypeNormal, "Synced", "  spaces around  ", 0, 0),
		event("web-1.1", "default", podRef, corev1.EventTypeNormal, "Started", "Started container web", 2, 0),
		event("node1.1", "default", nodeRef, corev1.EventTypeWarning, "Rebooted", "Node node1 has been rebooted", 1, 0),
		event("api.1", "other", corev1.ObjectReference{Kind: "Service", Namespace: "other", Name: "api"}, corev1.EventTypeNormal, "Seen", "seen", 1, 0),
	} {
		must(c.CoreV1().Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{}))
	}
}
