package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lb/plan"
)

// TestAssignAndRelease (kube tier): Services of our class (and of none) get the
// pool's addresses in order, with an IPAllocated Event naming the pool; one of
// another class is left alone, also when someone else wrote its status; a type
// change to ClusterIP clears the status and the address is reused; deleting the
// pool releases every address (IPReleased) and leaves the Services pending
// (AllocationFailed).
func TestAssignAndRelease(t *testing.T) {
	e := startEnv(t)
	e.createPool(t, "lab", "172.26.236.180-172.26.236.199")
	e.startController(t, "lb-test")

	e.createService(t, "a", "")
	e.waitIPs(t, "a", "172.26.236.180")
	if ev := e.waitEvent(t, "a", ReasonIPAllocated, "172.26.236.180", "lab"); ev.Type != corev1.EventTypeNormal || ev.Source.Component != Component {
		t.Errorf("IPAllocated event: type %q source %q, want Normal from %s", ev.Type, ev.Source.Component, Component)
	}
	e.createService(t, "b", plan.DefaultClass)
	b := e.waitIPs(t, "b", "172.26.236.181")
	if got := statusManagers(b); !slices.Equal(got, []string{"lb-test"}) {
		t.Errorf("status managers of b: %q, want [lb-test]", got)
	}

	e.createService(t, "other", "other.io/lb")
	e.createService(t, "other-written", "other.io/lb")
	e.updateService(t, "other-written", true, func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	})
	// c is created after the others: once it has its address, the controller has
	// seen them all.
	e.createService(t, "c", "")
	e.waitIPs(t, "c", "172.26.236.182")
	if got := ips(e.getService(t, "other")); len(got) != 0 {
		t.Errorf("service of class other.io/lb got ingress %v", got)
	}
	ow := e.getService(t, "other-written")
	if got := ips(ow); !slices.Equal(got, []string{"203.0.113.7"}) || slices.Contains(statusManagers(ow), "lb-test") {
		t.Errorf("other-written: ingress %v managers %q, want [203.0.113.7] written by someone-else only", got, statusManagers(ow))
	}

	e.updateService(t, "a", false, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP })
	e.waitIPs(t, "a")
	e.createService(t, "d", "")
	e.waitIPs(t, "d", "172.26.236.180")

	if err := e.dyn.Resource(poolGVR).Delete(apiCtx(t), "lab", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pool: %v", err)
	}
	for _, name := range []string{"b", "c", "d"} {
		e.waitIPs(t, name)
	}
	e.waitEvent(t, "b", ReasonIPReleased, "172.26.236.181")
	if ev := e.waitEvent(t, "b", ReasonAllocationFailed); ev.Type != corev1.EventTypeWarning {
		t.Errorf("AllocationFailed event type %q, want Warning", ev.Type)
	}
	if got := ips(e.getService(t, "other-written")); !slices.Equal(got, []string{"203.0.113.7"}) {
		t.Errorf("other-written after pool deletion: ingress %v", got)
	}
}

// TestExhaustedPool (kube tier): with one address for two Services, the older
// keeps it and the newer is pending with one Warning AllocationFailed naming the
// pool, however often it is recomputed; it gets the address once it is free.
func TestExhaustedPool(t *testing.T) {
	e := startEnv(t)
	e.createPool(t, "one", "172.26.236.190/32")
	e.startController(t, "lb-test")

	e.createService(t, "first", "")
	e.waitIPs(t, "first", "172.26.236.190")
	e.createService(t, "second", "")
	ev := e.waitEvent(t, "second", ReasonAllocationFailed, "one")
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("AllocationFailed event type %q, want Warning", ev.Type)
	}
	// Recompute several times (each Service update triggers one); the reason
	// stays the same, so no further Event.
	for i := range 3 {
		e.updateService(t, "second", false, func(s *corev1.Service) {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations["example.com/touch"] = fmt.Sprint(i)
		})
		time.Sleep(3 * coalesce)
	}
	// third's Event is recorded after every recompute above: Events are written
	// in order.
	e.createService(t, "third", "")
	e.waitEvent(t, "third", ReasonAllocationFailed, "one")
	evs := e.events(t, "second", ReasonAllocationFailed)
	if len(evs) != 1 || evs[0].Count > 1 {
		var counts []int32
		for _, ev := range evs {
			counts = append(counts, ev.Count)
		}
		t.Errorf("AllocationFailed events on second: %d (counts %v), want one, once", len(evs), counts)
	}
	if got := ips(e.getService(t, "second")); len(got) != 0 {
		t.Errorf("second has ingress %v while the pool is exhausted", got)
	}

	if err := e.Client.CoreV1().Services(testNS).Delete(apiCtx(t), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete first: %v", err)
	}
	e.waitIPs(t, "second", "172.26.236.190")
	e.waitEvent(t, "second", ReasonIPAllocated, "172.26.236.190", "one")
	if got := ips(e.getService(t, "third")); len(got) != 0 {
		t.Errorf("third got %v too", got)
	}
}

// TestRestartKeepsAssignments (kube tier): a new controller (after the first
// stopped) writes nothing for Services that have their addresses, and gives a
// Service created meanwhile, sorting first, a free address, not a taken one.
func TestRestartKeepsAssignments(t *testing.T) {
	e := startEnv(t)
	e.createPool(t, "lab", "172.26.236.180-172.26.236.199")
	first := e.startController(t, "lb-first")
	before := map[string]*corev1.Service{}
	for i, name := range []string{"s1", "s2", "s3"} {
		e.createService(t, name, "")
		before[name] = e.waitIPs(t, name, fmt.Sprintf("172.26.236.%d", 180+i))
	}
	if err := first.stop(t); err != nil {
		t.Fatalf("Run returned %v after cancel, want nil", err)
	}
	e.createService(t, "aaa", "")

	e.startController(t, "lb-second")
	e.waitIPs(t, "aaa", "172.26.236.183")
	// Let it run a few more recomputes.
	e.updateService(t, "aaa", false, func(s *corev1.Service) { s.Labels = map[string]string{"touched": "yes"} })
	time.Sleep(10 * coalesce)
	seen := map[string]string{"172.26.236.183": "aaa"}
	for name, old := range before {
		now := e.getService(t, name)
		if now.ResourceVersion != old.ResourceVersion || !slices.Equal(ips(now), ips(old)) {
			t.Errorf("%s: changed by the restarted controller: ingress %v -> %v, resourceVersion %s -> %s",
				name, ips(old), ips(now), old.ResourceVersion, now.ResourceVersion)
		}
		if slices.Contains(statusManagers(now), "lb-second") {
			t.Errorf("%s: status written by the restarted controller", name)
		}
		for _, ip := range ips(now) {
			if other, dup := seen[ip]; dup {
				t.Errorf("%s is both %s's and %s's", ip, name, other)
			}
			seen[ip] = name
		}
	}
}

// waitNamespace waits for a namespace the apiserver creates itself.
func waitNamespace(t *testing.T, e *lbEnv, name string) {
	kubetest.Eventually(t, waitTimeout, "namespace "+name, func() (bool, string) {
		_, err := e.Client.CoreV1().Namespaces().Get(apiCtx(t), name, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// TestRunWaitsForPools (kube tier): without the IPAddressPool CRD the pool
// informer never syncs, so the controller writes nothing (not even a release)
// and still stops promptly, returning nil, when cancelled.
func TestRunWaitsForPools(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	e := &lbEnv{Env: env}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	e.dyn = dyn
	kubetest.CreateNamespace(t, env.Client, testNS)
	// A status no plan would keep (no pool has it): a synced controller would
	// clear it.
	e.createService(t, "web", "")
	e.updateService(t, "web", true, func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.26.236.180"}}
	})
	r := e.startController(t, "lb-test")
	time.Sleep(2 * time.Second)
	if got := ips(e.getService(t, "web")); !slices.Equal(got, []string{"172.26.236.180"}) {
		t.Errorf("status written before the caches synced: ingress %v", got)
	}
	begin := time.Now()
	if err := r.stop(t); err != nil {
		t.Errorf("Run after cancel: %v, want nil", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Run took %v to stop", d)
	}
}
