//lint:file-ignore SA1019 legacy v1 Endpoints are read and mirrored on purpose, as kube-controller-manager does

package controlplane

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// cluster is a varied set of manifests: every Service type, dual-stack, named
// ports, many Pods, legacy Endpoints, a user slice and a few invalid objects.
func cluster() []Object {
	var objs []runtimeObject
	objs = append(objs,
		svc("web", withType(corev1.ServiceTypeLoadBalancer), withPolicy(*prefer), withPorts(tcp("http", 80, intstr.FromString("http"))),
			func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Labels = map[string]string{"tier": "front", "b": "2", "a": "1"}
			}),
		svc("api", withType(corev1.ServiceTypeNodePort), withPolicy(*require, v6)),
		svc("db", withClusterIP("None")),
		svc("ext", withType(corev1.ServiceTypeExternalName), noSelector, func(s *corev1.Service) { s.Spec.ExternalName = "example.com" }),
		svc("legacy", noSelector),
		svc("legacy", inNamespace("prod"), noSelector),
		svc("bad", withPorts(corev1.ServicePort{Port: 0})),
		svc("clash", withClusterIP("10.96.0.77")), svc("clash2", withClusterIP("10.96.0.77")),
		legacyEndpoints("legacy", corev1.EndpointSubset{Addresses: addrs("10.1.0.2", "10.1.0.1", "fd00::1"), NotReadyAddresses: addrs("10.1.0.3")}),
		node("node1", "zone-a"), node("node2", "zone-b"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "legacy-manual", Namespace: "prod", Labels: map[string]string{discoveryv1.LabelServiceName: "legacy"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.2.0.1"}}},
		},
		pod("broken", "web", "not-an-ip"),
	)
	for i := 0; i < 250; i++ {
		p := pod(fmt.Sprintf("web-%03d", i), "web", fmt.Sprintf("192.168.%d.%d", i%2+1, i+1), fmt.Sprintf("fd00:192:168::%x", i+1))
		p.Spec.NodeName = fmt.Sprintf("node%d", i%2+1)
		withContainerPort(p, "http", int32(8080+i%3))
		if i%7 == 0 {
			notReady(p)
		}
		objs = append(objs, p)
	}
	for i := 0; i < 30; i++ {
		objs = append(objs, pod(fmt.Sprintf("api-%02d", i), "api", fmt.Sprintf("192.168.3.%d", i+1), fmt.Sprintf("fd00:192:168:3::%x", i+1)))
		objs = append(objs, pod(fmt.Sprintf("db-%02d", i), "db", fmt.Sprintf("192.168.4.%d", i+1)))
	}
	return toObjects(objs...)
}

// canonical is r as JSON, with Errors as a sorted list of strings: their order
// follows the input by contract.
func canonical(t *testing.T, r Result) string {
	t.Helper()
	errs := errorStrings(r)
	sort.Strings(errs)
	r.Errors = nil
	b, err := json.Marshal(struct {
		R    Result
		Errs []string
	}{r, errs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDeterminism(t *testing.T) {
	objs := cluster()
	first := Reconcile(dualStack, objs, State{}, testNow)
	if len(first.Errors) != 3 {
		t.Fatalf("errors = %v, want bad, clash2 and the broken pod", errorStrings(first))
	}
	want := canonical(t, first)
	again := Reconcile(dualStack, objs, State{}, testNow)
	if diff := cmp.Diff(first, again, sameErrorText); diff != "" {
		t.Fatalf("same input, different Result (-first +second):\n%s", diff)
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 5; i++ {
		shuffled := append([]Object(nil), objs...)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if got := canonical(t, Reconcile(dualStack, shuffled, State{}, testNow)); got != want {
			t.Fatalf("shuffle %d gave a different Result:\n%s", i, cmp.Diff(want, got))
		}
		// With the State of the first run, too.
		withState := canonical(t, Reconcile(dualStack, shuffled, first.State, testNow))
		if withState != want {
			t.Fatalf("shuffle %d with State gave a different Result:\n%s", i, cmp.Diff(want, withState))
		}
	}
}

func TestResultIsSorted(t *testing.T) {
	res := Reconcile(dualStack, cluster(), State{}, testNow)
	key := func(o metav1.Object) string { return o.GetNamespace() + "\x00" + o.GetName() }
	check := func(kind string, keys []string) {
		if !sort.StringsAreSorted(keys) {
			t.Errorf("%s are not sorted by namespace/name", kind)
		}
	}
	var k []string
	for _, o := range res.Services {
		k = append(k, key(o))
	}
	check("Services", k)
	k = nil
	for _, o := range res.EndpointSlices {
		k = append(k, key(o))
	}
	check("EndpointSlices", k)
	k = nil
	for _, o := range res.Pods {
		k = append(k, key(o))
	}
	check("Pods", k)
}
