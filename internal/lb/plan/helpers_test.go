package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// lbSvc is a TCP/80 IPv4 LoadBalancer Service "ns/name" (or default/name) created
// n minutes after t0, changed by the options.
func lbSvc(name string, n int, opts ...func(*corev1.Service)) *corev1.Service {
	ns, nm := "default", name
	if a, b, ok := strings.Cut(name, "/"); ok {
		ns, nm = a, b
	}
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nm, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(n) * time.Minute))},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeLoadBalancer,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}},
			Selector:   map[string]string{"app": nm},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func class(c string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To(c) }
}

func ann(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func status(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

func typ(t corev1.ServiceType) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Type = t }
}

func local(s *corev1.Service) {
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
}

func dual(policy corev1.IPFamilyPolicy) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		s.Spec.IPFamilyPolicy = ptr.To(policy)
	}
}

func ports(ps ...int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Ports = nil
		for _, p := range ps {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: p}) // protocol defaults to TCP
		}
	}
}

func ipPool(name, mode string, addrs ...string) *pool.IPAddressPool {
	return &pool.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: pool.IPAddressPoolSpec{Mode: mode, Addresses: addrs}}
}

// node is a node with the given Ready state and addresses ("int:IP" or "ext:IP").
func node(name string, ready bool, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: st}}
	for _, a := range addrs {
		kind, ip, _ := strings.Cut(a, ":")
		t := corev1.NodeInternalIP
		if kind == "ext" {
			t = corev1.NodeExternalIP
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: t, Address: ip})
	}
	return n
}

// slice is an EndpointSlice of default/svc with one endpoint per "node=ready" entry.
func slice(svc string, eps ...string) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: svc + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, e := range eps {
		nodeName, ready, _ := strings.Cut(e, "=")
		ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("192.168.1.%d", i+1)}, NodeName: ptr.To(nodeName)}
		if ready != "" {
			ep.Conditions.Ready = ptr.To(ready == "true")
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	return sl
}

// summary is "pool ip,ip" for an assigned result, "released" for a released one,
// and "pending: <error>" for a pending one.
func summary(r ServiceResult) string {
	switch {
	case r.Err != nil:
		if r.Ingress != nil || r.Pool != "" {
			return fmt.Sprintf("BAD: pending with ingress %v pool %q", r.Ingress, r.Pool)
		}
		return "pending: " + r.Err.Error()
	case r.Ingress == nil:
		return "released"
	}
	var ips []string
	for _, ing := range r.Ingress {
		mode := "nil"
		if ing.IPMode != nil {
			mode = string(*ing.IPMode)
		}
		if mode != "VIP" {
			return "BAD: ipMode " + mode
		}
		ips = append(ips, ing.IP)
	}
	return r.Pool + " " + strings.Join(ips, ",")
}

func summarize(t *testing.T, out Output) map[string]string {
	t.Helper()
	got := map[string]string{}
	for i, r := range out.Results {
		if i > 0 && compareKeys(out.Results[i-1].Key, r.Key) >= 0 {
			t.Errorf("results not sorted: %s after %s", r.Key, out.Results[i-1].Key)
		}
		got[r.Key.String()] = summary(r)
	}
	return got
}
