package controlplane

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The embedded control plane's Result carries svcnet lb's events for what
// it decided: the address and pool a LoadBalancer Service got, why
// another has none, and each admitted pool's acceptance, each event
// naming its object by kind, name and UID.
func TestLoadBalancerEvents(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	res := run(t, addrPool("lab", "172.26.236.180-172.26.236.180"), svc("a", lb), svc("b", lb), svc("c"))
	var got []string
	for _, e := range res.Events {
		o := e.InvolvedObject
		if o.Name == "" || (o.Kind == "Service" && o.UID != findService(t, res, "default", o.Name).UID) {
			t.Errorf("event %s: reference %+v", e.Name, o)
		}
		if !e.FirstTimestamp.Time.Equal(testNow) || e.Count != 1 || e.Source.Component != EventSource || e.Namespace != "default" {
			t.Errorf("event %s: %+v", e.Name, e)
		}
		got = append(got, fmt.Sprintf("%s/%s %s %s: %s", o.Kind, o.Name, e.Type, e.Reason, e.Message))
	}
	want := []string{
		"IPAddressPool/lab Normal PoolAccepted: the pool serves LoadBalancer Services",
		"Service/a Normal IPAllocated: Assigned IP 172.26.236.180 from pool lab",
		"Service/b Warning AllocationFailed: " + pendingWarning(t, res, "b"),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n%q\nwant:\n%q", got, want)
	}
}

// pendingWarning is the reason Result.Warnings gives for Service name.
func pendingWarning(t *testing.T, res Result, name string) string {
	t.Helper()
	for _, w := range res.Warnings {
		if w.Kind == "Service" && w.Name == name {
			return w.Err.Error()
		}
	}
	t.Fatalf("no warning for %s", name)
	return ""
}

// A node agent's control plane reading the Services the lab's published
// (creationTimestamp set) names each as the lab's did, however much later
// and without the lab's State, so that the agent's events about a
// Service are found on it.
func TestPublishedServiceKeepsItsIdentity(t *testing.T) {
	lab := run(t, svc("web"))
	published := findService(t, lab, "default", "web").DeepCopy()
	later := Reconcile(DefaultConfig(), toObjects(published), State{}, testNow.Add(90*time.Second))
	again := findService(t, later, "default", "web")
	if again.UID != published.UID || !again.CreationTimestamp.Equal(&published.CreationTimestamp) {
		t.Errorf("re-read: UID %s created %v; the lab's: %s %v", again.UID, again.CreationTimestamp, published.UID, published.CreationTimestamp)
	}
	// Without a creationTimestamp, a Service created at another time is
	// another object.
	other := Reconcile(DefaultConfig(), toObjects(svc("web")), State{}, testNow.Add(90*time.Second))
	if findService(t, other, "default", "web").UID == published.UID {
		t.Error("a Service created 90 s later has the same UID")
	}
}
