package kubectlget

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// TestEndpointsDerived: from the embedded control plane's EndpointSlices,
// one Endpoints per Service with a selector (none for an ExternalName or
// a selector-less Service without slices), ready addresses apart from
// not-ready ones, subsets by port set, addresses by IP; kubectl's table
// shows three and "+ N more...".
func TestEndpointsDerived(t *testing.T) {
	slice := func(name, svc string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints: eps}
	}
	ep := func(ip string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
	}
	svc := func(name string, typ corev1.ServiceType, sel map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.ServiceSpec{Type: typ, Selector: sel}}
	}
	r := &controlplane.Result{
		Services: []*corev1.Service{svc("web", corev1.ServiceTypeClusterIP, map[string]string{"app": "web"}),
			svc("empty", corev1.ServiceTypeClusterIP, map[string]string{"app": "none"}),
			svc("manual", corev1.ServiceTypeClusterIP, nil), svc("ext", corev1.ServiceTypeExternalName, nil)},
		EndpointSlices: []*discoveryv1.EndpointSlice{
			slice("web-b", "web", 80, ep("10.0.0.9", true), ep("10.0.0.5", false)),
			slice("web-a", "web", 80, ep("10.0.0.3", true), ep("10.0.0.1", true), ep("10.0.0.2", true)),
		},
	}
	eps := endpointsOf(r)
	if len(eps) != 2 || eps[0].Name != "web" || eps[1].Name != "empty" || len(eps[1].Subsets) != 0 {
		t.Fatalf("Endpoints %+v; want web and an empty one for empty", eps)
	}
	ss := eps[0].Subsets
	if len(ss) != 1 || len(ss[0].Addresses) != 4 || ss[0].Addresses[0].IP != "10.0.0.1" || ss[0].Addresses[3].IP != "10.0.0.9" ||
		len(ss[0].NotReadyAddresses) != 1 || ss[0].Ports[0].Port != 80 {
		t.Fatalf("web's subsets %+v", ss)
	}
	var out strings.Builder
	if err := Get(&out, &out, r, []string{"ep"}, Options{NoHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if want := "empty   <none>                                            <unknown>\nweb     10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more...   <unknown>\n"; out.String() != want {
		t.Errorf("get ep:\n%q\nwant\n%q", out.String(), want)
	}
}
