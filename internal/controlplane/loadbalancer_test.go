package controlplane

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

func addrPool(name string, addrs ...string) *pool.IPAddressPool {
	return &pool.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: pool.IPAddressPoolSpec{Addresses: addrs}}
}

func lbIPs(t *testing.T, res Result, name string) []string {
	t.Helper()
	var out []string
	for _, ing := range findService(t, res, "default", name).Status.LoadBalancer.Ingress {
		out = append(out, ing.IP)
	}
	return out
}

func withClass(c string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &c }
}

func withIngress(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	}
}

// The embedded control plane plays svcnet lb controller: LoadBalancer Services get
// IPs from the manifests' pools, kept across runs through the State.
func TestLoadBalancerIPsFromPools(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	p := addrPool("lab", "172.26.236.180-172.26.236.181")
	res := run(t, p, svc("a", lb), svc("b", lb), svc("c"))
	if got := strings.Join(lbIPs(t, res, "a"), ","); got != "172.26.236.180" {
		t.Errorf("a: %s, want 172.26.236.180", got)
	}
	if got := strings.Join(lbIPs(t, res, "b"), ","); got != "172.26.236.181" {
		t.Errorf("b: %s, want 172.26.236.181", got)
	}
	if got := lbIPs(t, res, "c"); len(got) != 0 {
		t.Errorf("ClusterIP Service c has LB status %v", got)
	}
	if got := res.State.Services["default/b"].LoadBalancerIPs; len(got) != 1 || got[0] != "172.26.236.181" {
		t.Errorf("State of b: %v", got)
	}
	if len(res.Pools) != 1 || res.Pools[0].Name != "lab" || res.Pools[0].Kind != pool.Kind {
		t.Errorf("Pools = %v", res.Pools)
	}

	// a is deleted and z added: b keeps .181 from the State, z takes the freed .180.
	res2 := runWith(t, DefaultConfig(), res.State, p, svc("b", lb), svc("z", lb))
	if got := strings.Join(lbIPs(t, res2, "b"), ","); got != "172.26.236.181" {
		t.Errorf("after restart b: %s, want 172.26.236.181", got)
	}
	if got := strings.Join(lbIPs(t, res2, "z"), ","); got != "172.26.236.180" {
		t.Errorf("z: %s, want the freed 172.26.236.180", got)
	}

	// The pool is exhausted: a third Service pends with a warning naming the pool.
	res3 := runWith(t, DefaultConfig(), res2.State, p, svc("b", lb), svc("z", lb), svc("y", lb))
	if got := lbIPs(t, res3, "y"); len(got) != 0 {
		t.Errorf("y got %v from an exhausted pool", got)
	}
	if len(res3.Warnings) != 1 || !strings.Contains(res3.Warnings[0].Error(), "Service default/y") || !strings.Contains(res3.Warnings[0].Error(), "lab") {
		t.Errorf("warnings = %v, want one for default/y naming pool lab", res3.Warnings)
	}
	if res3.Warnings[0].Origin != "obj3.yaml" {
		t.Errorf("warning origin %q, want obj3.yaml", res3.Warnings[0].Origin)
	}
}

// A status written in a manifest is the current status: a published, resolved
// Service keeps its IP in every reader, and another class's status is left alone.
func TestLoadBalancerManifestStatus(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	p := addrPool("lab", "172.26.236.180-172.26.236.189")
	res := run(t, p, svc("a", lb), svc("b", lb, withIngress("172.26.236.185")),
		svc("other", lb, withClass("other.io/lb"), withIngress("198.51.100.7")),
		svc("was-lb", withIngress("172.26.236.186")))
	if got := strings.Join(lbIPs(t, res, "b"), ","); got != "172.26.236.185" {
		t.Errorf("b: %s, want its manifest's 172.26.236.185", got)
	}
	if got := strings.Join(lbIPs(t, res, "a"), ","); got != "172.26.236.180" {
		t.Errorf("a: %s, want 172.26.236.180", got)
	}
	if got := strings.Join(lbIPs(t, res, "other"), ","); got != "198.51.100.7" {
		t.Errorf("other class: %s, want its own status kept", got)
	}
	if got := lbIPs(t, res, "was-lb"); len(got) != 0 {
		t.Errorf("a ClusterIP Service keeps LB status %v", got)
	}
}

// A bad pool is an error naming its origin and is left out; the others serve.
func TestLoadBalancerBadPool(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	res := Reconcile(DefaultConfig(), toObjects(addrPool("bad", "172.26.236.199-172.26.236.180"),
		addrPool("good", "172.26.236.180/31"), svc("a", lb)), State{}, testNow)
	if len(res.Errors) != 1 || !strings.HasPrefix(res.Errors[0].Error(), "obj0.yaml: IPAddressPool bad: ") {
		t.Fatalf("errors = %v, want one for obj0.yaml IPAddressPool bad", res.Errors)
	}
	if got := strings.Join(lbIPs(t, res, "a"), ","); got != "172.26.236.180" {
		t.Errorf("a: %s, want 172.26.236.180 from pool good", got)
	}
}

// Node-ip mode: the Service's ingress is the ready nodes' addresses, which are
// not recorded as allocations.
func TestLoadBalancerNodeIP(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	np := &pool.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "nodes"}, Spec: pool.IPAddressPoolSpec{Mode: "node-ip"}}
	ready := func(name, ip string) *corev1.Node {
		n := node(name, "")
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	res := run(t, np, ready("node1", "172.26.236.177"), ready("node2", "172.26.236.178"), svc("a", lb))
	if got := strings.Join(lbIPs(t, res, "a"), ","); got != "172.26.236.177,172.26.236.178" {
		t.Errorf("a: %s, want both node IPs", got)
	}
	if got := res.State.Services["default/a"].LoadBalancerIPs; len(got) != 0 {
		t.Errorf("node IPs recorded as allocations: %v", got)
	}
}
