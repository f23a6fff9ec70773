package printers

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func meta(ns, name string, age time.Duration) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}
}

func TestServicesTable(t *testing.T) {
	svcs := []*corev1.Service{
		{ObjectMeta: meta("default", "kubernetes", 25*time.Hour), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}},
		{ObjectMeta: meta("default", "my-nginx", 24*time.Hour), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.106.189.218", ClusterIPs: []string{"10.106.189.218"},
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 31428, Protocol: corev1.ProtocolTCP}}, Selector: map[string]string{"run": "my-nginx"}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.26.236.180"}}}}},
		{ObjectMeta: meta("default", "pending", 90*time.Second), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.5.5",
			Ports: []corev1.ServicePort{{Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP}, {Port: 53, NodePort: 30053, Protocol: corev1.ProtocolTCP}}}},
		{ObjectMeta: meta("default", "headless", 5*time.Minute), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "None", ClusterIPs: []string{"None"}}},
		{ObjectMeta: meta("default", "ext", 3*24*time.Hour), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}},
	}
	var b bytes.Buffer
	if err := Services(&b, svcs, Options{Wide: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	want := `NAME         TYPE           CLUSTER-IP       EXTERNAL-IP      PORT(S)                     AGE   SELECTOR
kubernetes   ClusterIP      10.96.0.1        <none>           443/TCP                     25h   <none>
my-nginx     LoadBalancer   10.106.189.218   172.26.236.180   80:31428/TCP                24h   run=my-nginx
pending      LoadBalancer   10.96.5.5        <pending>        53:30053/UDP,53:30053/TCP   90s   <none>
headless     ClusterIP      None             <none>           <none>                      5m    <none>
ext          ExternalName   <none>           example.com      <none>                      3d    <none>
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestEndpointSlicesNodesPodsTables(t *testing.T) {
	var b bytes.Buffer
	sl := &discoveryv1.EndpointSlice{ObjectMeta: meta("default", "my-nginx-abcde", time.Hour), AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}}}
	for _, a := range []string{"192.168.2.2", "192.168.3.2", "192.168.3.3", "192.168.3.4", "192.168.3.5"} {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	empty := &discoveryv1.EndpointSlice{ObjectMeta: meta("kube-system", "x-1", time.Hour), AddressType: discoveryv1.AddressTypeIPv6}
	if err := EndpointSlices(&b, []*discoveryv1.EndpointSlice{sl, empty}, Options{AllNamespaces: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE     NAME             ADDRESSTYPE   PORTS     ENDPOINTS                                         AGE
default       my-nginx-abcde   IPv4          80        192.168.2.2,192.168.3.2,192.168.3.3 + 2 more...   60m
kube-system   x-1              IPv6          <unset>   <unset>                                           60m
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	n := &corev1.Node{ObjectMeta: meta("", "node1", 48*time.Hour), Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.26.236.177"}}}}
	n.Labels = map[string]string{"node-role.kubernetes.io/worker": ""}
	if err := Nodes(&b, []*corev1.Node{n}, Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	if want := "NAME    STATUS   ROLES    AGE   VERSION\nnode1   Ready    worker   2d    <none>\n"; b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	p := &corev1.Pod{ObjectMeta: meta("default", "my-nginx-1", 10*time.Minute), Spec: corev1.PodSpec{NodeName: "node2", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "192.168.2.2", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	if err := Pods(&b, []*corev1.Pod{p}, Options{Wide: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	want = "NAME         READY   STATUS    RESTARTS   AGE   IP            NODE    NOMINATED NODE   READINESS GATES\nmy-nginx-1   1/1     Running   0          10m   192.168.2.2   node2   <none>           <none>\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// columns separates the cells of a table row (at least two spaces).
var columns = regexp.MustCompile(`  +`)

// RESTARTS and STATUS as kubectl's printPod shows them for containers a
// kubelet restarts.
func TestPodsRestartsAndContainerReasons(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	ended := func(ago time.Duration) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9, Reason: "Error",
			FinishedAt: metav1.NewTime(now.Add(-ago))}}
	}
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name   string
		status corev1.PodStatus
		want   string
	}{
		{"restarted and running", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "a", Ready: true, RestartCount: 2, State: running, LastTerminationState: ended(5 * time.Second)},
			{Name: "b", Ready: true, RestartCount: 1, State: running, LastTerminationState: ended(3 * time.Minute)},
		}}, "p|2/2|Running|3 (5s ago)|60m"},
		{"back-off", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "a", RestartCount: 4, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: ended(70 * time.Second)},
			{Name: "b", Ready: true, State: running},
		}}, "p|1/2|CrashLoopBackOff|4 (70s ago)|60m"},
		{"just ended", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "a", RestartCount: 0, State: ended(time.Second)},
			{Name: "b", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Signal: 15, ExitCode: 143}}},
		}}, "p|0/2|Error|0|60m"},
	} {
		p := &corev1.Pod{ObjectMeta: meta("default", "p", time.Hour), Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}, Status: tc.status}
		var b bytes.Buffer
		if err := Pods(&b, []*corev1.Pod{p}, Options{Now: now}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != 2 || columns.ReplaceAllString(lines[1], "|") != tc.want {
			t.Errorf("%s: got\n%s\nwant the row %s", tc.name, b.String(), tc.want)
		}
	}
}
