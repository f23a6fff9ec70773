package datapathbench

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// fillerEndpoints is where filler endpoints live: never reached by the
// benchmark's traffic.
var fillerEndpoints = netip.MustParsePrefix("10.255.0.0/16")

// fillerName names filler i (0-based).
func fillerName(i int) string { return fmt.Sprintf("filler-%05d", i) }

// fillerAddr returns endpoint j (0 or 1) of filler i: two distinct addresses in
// fillerEndpoints per filler, for up to 32767 fillers.
func fillerAddr(i, j int) netip.Addr {
	n := 2*i + j + 1
	b := fillerEndpoints.Addr().As4()
	b[2], b[3] = byte(n>>8), byte(n)
	return netip.AddrFrom4(b)
}

// fillers returns fillers first..last-1: each a selector-less ClusterIP
// Service (TCP 80) and one EndpointSlice of 2 ready endpoints.
func fillers(first, last int) []controlplane.Object {
	objs := make([]controlplane.Object, 0, 2*(last-first))
	port, proto, ready := int32(80), corev1.ProtocolTCP, true
	for i := first; i < last; i++ {
		name := fillerName(i)
		svc := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{
				Type:  corev1.ServiceTypeClusterIP,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(80), Protocol: proto}},
			},
		}
		slice := &discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: metav1.NamespaceDefault,
				Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: &port, Protocol: &proto}},
		}
		for j := range 2 {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fillerAddr(i, j).String()},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			})
		}
		origin := "bench/" + name
		objs = append(objs, controlplane.Object{Origin: origin, Obj: svc}, controlplane.Object{Origin: origin + "-1", Obj: slice})
	}
	return objs
}

// probeService returns a ClusterIP Service selecting srv-remote, applied after
// a batch of fillers: once it answers from both nodes, both proxies have
// programmed everything published before it.
func probeService(name string) controlplane.Object {
	return controlplane.Object{Origin: "bench/" + name, Obj: &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "remote"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}},
		},
	}}
}

func ptr[T any](v T) *T { return &v }
