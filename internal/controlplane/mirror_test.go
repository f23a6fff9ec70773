//lint:file-ignore SA1019 legacy v1 Endpoints are read and mirrored on purpose, as kube-controller-manager does

package controlplane

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func legacyEndpoints(name string, subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name}, Subsets: subsets}
}

func addrs(ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, corev1.EndpointAddress{IP: ip})
	}
	return out
}

func TestMirrorEndpoints(t *testing.T) {
	ep := legacyEndpoints("ext-db", corev1.EndpointSubset{
		Addresses: []corev1.EndpointAddress{{
			IP: "10.1.0.1", Hostname: "db-0", NodeName: ptr("node1"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "db-0", UID: "u1"},
		}},
		NotReadyAddresses: addrs("10.1.0.2"),
		Ports:             []corev1.EndpointPort{{Name: "db", Port: 5432}},
	})
	ep.UID = "ep-uid"
	ep.Labels = map[string]string{"team": "data"}
	ep.Annotations = map[string]string{"note": "x", corev1.LastAppliedConfigAnnotation: "{}"}
	res := run(t, svc("ext-db", noSelector, withPorts(tcp("db", 5432, intstr.FromInt32(5432)))), ep)
	got := slicesOf(res, "default", "ext-db")
	if len(got) != 1 {
		t.Fatalf("got %d slices, want 1", len(got))
	}
	s := got[0]
	want := &discoveryv1.EndpointSlice{
		TypeMeta: typeSlice,
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, GenerateName: "ext-db-", Namespace: "default", UID: s.UID,
			CreationTimestamp: metav1.NewTime(testNow),
			Labels: map[string]string{
				"team": "data", discoveryv1.LabelServiceName: "ext-db",
				discoveryv1.LabelManagedBy: "endpointslicemirroring-controller.k8s.io",
			},
			Annotations:     map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Endpoints", Name: "ext-db", UID: "ep-uid", Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("db"), Port: ptr(int32(5432)), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{
			{
				Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
				Hostname: ptr("db-0"), NodeName: ptr("node1"),
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "db-0", UID: "u1"},
			},
			{Addresses: []string{"10.1.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}},
		},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("mirrored slice (-want +got):\n%s", diff)
	}
}

func TestMirrorGroupsByFamilyAndPorts(t *testing.T) {
	p := func(name string, port int32) []corev1.EndpointPort {
		return []corev1.EndpointPort{{Name: name, Port: port, Protocol: corev1.ProtocolTCP}}
	}
	ep := legacyEndpoints("ext",
		corev1.EndpointSubset{Addresses: addrs("10.1.0.1", "fd00::1"), Ports: p("a", 80)},
		corev1.EndpointSubset{Addresses: addrs("10.1.0.2"), Ports: p("a", 80)}, // same ports: merged
		corev1.EndpointSubset{Addresses: addrs("10.1.0.3"), Ports: p("b", 81)},
		// Listed ready and not ready for the same port: not ready wins.
		corev1.EndpointSubset{Addresses: addrs("10.1.0.4"), NotReadyAddresses: addrs("10.1.0.4"), Ports: p("c", 82)},
	)
	res := run(t, svc("ext", noSelector), ep)
	got := map[string][]string{}
	for _, s := range slicesOf(res, "default", "ext") {
		key := fmt.Sprintf("%s %s=%d", s.AddressType, *s.Ports[0].Name, *s.Ports[0].Port)
		for _, e := range s.Endpoints {
			got[key] = append(got[key], fmt.Sprintf("%s ready=%v", e.Addresses[0], *e.Conditions.Ready))
		}
	}
	want := map[string][]string{
		"IPv4 a=80": {"10.1.0.1 ready=true", "10.1.0.2 ready=true"},
		"IPv6 a=80": {"fd00::1 ready=true"},
		"IPv4 b=81": {"10.1.0.3 ready=true"},
		"IPv4 c=82": {"10.1.0.4 ready=false"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mirrored endpoints by slice (-want +got):\n%s", diff)
	}
}

func TestMirrorOnlySelectorlessServices(t *testing.T) {
	skip := legacyEndpoints("skipped", corev1.EndpointSubset{Addresses: addrs("10.1.0.3")})
	skip.Labels = map[string]string{discoveryv1.LabelSkipMirror: "true"}
	res := run(t,
		svc("with-selector"), legacyEndpoints("with-selector", corev1.EndpointSubset{Addresses: addrs("10.1.0.1")}),
		legacyEndpoints("no-service", corev1.EndpointSubset{Addresses: addrs("10.1.0.2")}),
		svc("skipped", noSelector), skip,
	)
	for _, s := range res.EndpointSlices {
		if s.Labels[discoveryv1.LabelManagedBy] == controllerEndpointSliceMirroring {
			t.Errorf("mirrored %s for Service %s", s.Name, s.Labels[discoveryv1.LabelServiceName])
		}
	}
}

func TestMirrorCapsASubsetAt1000(t *testing.T) {
	var ready []string
	for i := 0; i < 1200; i++ {
		ready = append(ready, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))
	}
	res := run(t, svc("big", noSelector), legacyEndpoints("big", corev1.EndpointSubset{Addresses: addrs(ready...)}))
	sl := slicesOf(res, "default", "big")
	if len(sl) != 1 || len(sl[0].Endpoints) != 1000 {
		t.Errorf("got %d slices, first with %d endpoints; want one slice of 1000", len(sl), len(sl[0].Endpoints))
	}
}
