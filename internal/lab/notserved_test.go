package lab

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controlplane"
)

func TestNotServedWarnings(t *testing.T) {
	svc := func(name string, typ corev1.ServiceType, selector map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: k8stypes.UID("uid-" + name)},
			Spec: corev1.ServiceSpec{Type: typ, Selector: selector}}
	}
	served := svc("served", corev1.ServiceTypeLoadBalancer, map[string]string{"app": "web"})
	served.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.26.236.180"}}
	pending := svc("pending", corev1.ServiceTypeLoadBalancer, map[string]string{"app": "web"})
	waiting := svc("waiting", corev1.ServiceTypeLoadBalancer, map[string]string{"app": "web"})
	empty := svc("empty", corev1.ServiceTypeClusterIP, map[string]string{"app": "none"})
	manual := svc("manual", corev1.ServiceTypeClusterIP, nil)
	notReady := svc("not-ready", corev1.ServiceTypeClusterIP, map[string]string{"app": "web"})
	ext := svc("ext", corev1.ServiceTypeExternalName, nil)
	slice := func(service string, ready *bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: service + "-x",
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"192.168.1.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}}}
	}
	failed := corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "pending", UID: pending.UID},
		Reason: "AllocationFailed", Message: "no available IPs in pool lab", Source: corev1.EventSource{Component: controlplane.EventSource}}
	skip := func(node string) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "served", UID: served.UID},
			Reason: "ServiceSkipped", Message: "port http not served on node " + node + ": conflict", Source: corev1.EventSource{Component: "svcnet-proxy", Host: node}}
	}
	r := &controlplane.Result{
		Services:       []*corev1.Service{served, pending, waiting, empty, manual, notReady, ext},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("served", nil), slice("pending", ptr.To(true)), slice("waiting", ptr.To(true)), slice("not-ready", ptr.To(false))},
		Events:         []corev1.Event{failed, skip("node2"), skip("node1"), skip("node1")},
	}
	var objs []controlplane.Object
	for _, s := range r.Services {
		given := s.DeepCopy()
		given.Namespace = "" // as written in a manifest
		objs = append(objs, controlplane.Object{Obj: given})
	}
	objs = append(objs, controlplane.Object{Obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "refused"}}})
	got, final := notServed(r, objs)
	want := []string{
		"Service default/served: not served by svcnet proxy: port http not served on node node1: conflict",
		"Service default/served: not served by svcnet proxy: port http not served on node node2: conflict",
		"Service default/pending: LoadBalancer address <pending>: no available IPs in pool lab",
		"Service default/waiting: LoadBalancer address <pending>: no address allocated yet",
		"Service default/empty: no endpoints: no ready Pod matches its selector app=none",
		"Service default/manual: no endpoints: no EndpointSlice gives it a ready endpoint",
		"Service default/not-ready: no endpoints: no ready Pod matches its selector app=web",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || final {
		t.Errorf("got (final %v):\n%q\nwant (not final: endpoints may come):\n%q", final, got, want)
	}
	// A pending Service whose reason svcnet lb gave, with endpoints, is final.
	if w, final := notServed(r, objs[1:2]); len(w) != 1 || !final {
		t.Errorf("pending alone: %q, final %v; want one warning, final", w, final)
	}
	// One without a reason yet is not.
	if _, final := notServed(r, objs[2:3]); final {
		t.Error("waiting: final; want not final (no reason from svcnet lb yet)")
	}
}
