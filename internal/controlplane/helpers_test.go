package controlplane

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type runtimeObject = runtime.Object

// testNow is the clock of every test run.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// svc builds a Service default/<name> with one TCP port 80 unless mutators change it.
func svc(name string, mut ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func withType(t corev1.ServiceType) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Type = t }
}

func withClusterIP(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.ClusterIP = ip }
}

func inNamespace(ns string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Namespace = ns }
}

func withPorts(ports ...corev1.ServicePort) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Ports = ports }
}

func withPolicy(p corev1.IPFamilyPolicy, fams ...corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &p, fams }
}

func noSelector(s *corev1.Service) { s.Spec.Selector = nil }

// pod builds a running Pod default/<name> labelled app=<app> with the given IPs.
func pod(name, app string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func notReady(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	return p
}

func withContainerPort(p *corev1.Pod, name string, port int32) *corev1.Pod {
	p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: name, ContainerPort: port})
	return p
}

func node(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if zone != "" {
		n.Labels = map[string]string{corev1.LabelTopologyZone: zone}
	}
	return n
}

func tcp(name string, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}
}

// run reconciles objs with the default config and no previous state, failing the
// test on any error.
func run(t *testing.T, objs ...runtimeObject) Result {
	t.Helper()
	return runWith(t, DefaultConfig(), State{}, objs...)
}

func runWith(t *testing.T, cfg Config, prev State, objs ...runtimeObject) Result {
	t.Helper()
	res := Reconcile(cfg, toObjects(objs...), prev, testNow)
	for _, e := range res.Errors {
		t.Errorf("unexpected error: %v", e)
	}
	return res
}

func toObjects(objs ...runtimeObject) []Object {
	out := make([]Object, len(objs))
	for i, o := range objs {
		out[i] = Object{Origin: fmt.Sprintf("obj%d.yaml", i), Obj: o}
	}
	return out
}

func findService(t *testing.T, res Result, ns, name string) *corev1.Service {
	t.Helper()
	for _, s := range res.Services {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	t.Fatalf("service %s/%s not in result", ns, name)
	return nil
}

// slicesOf returns the slices labelled for Service ns/name.
func slicesOf(res Result, ns, name string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, s := range res.EndpointSlices {
		if s.Namespace == ns && s.Labels[discoveryv1.LabelServiceName] == name {
			out = append(out, s)
		}
	}
	return out
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// sameErrorText compares errors (which hold unexported fields) by their text.
var sameErrorText = cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })
