package controller

import (
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

func TestAcceptedCondition(t *testing.T) {
	overlap := &pool.Error{Pool: "b", Other: "a", Problems: []string{"spec.addresses[0]: 10.0.0.1 overlaps IPAddressPool a (10.0.0.0-10.0.0.9)"}}
	reserved := &pool.Error{Pool: "b", Reserved: true, Problems: []string{"spec.addresses[0]: holds Node n's InternalIP 10.0.0.1"}}
	invalid := &pool.Error{Pool: "b", Problems: []string{"spec.mode: bad"}}
	for _, tc := range []struct {
		r    plan.PoolResult
		want metav1.Condition
	}{
		{plan.PoolResult{Name: "b", Admitted: true}, metav1.Condition{Status: metav1.ConditionTrue, Reason: pool.ReasonAccepted,
			Message: "the pool serves LoadBalancer Services"}},
		{plan.PoolResult{Name: "b", Admitted: true, Conflict: reserved}, metav1.Condition{Status: metav1.ConditionTrue,
			Reason: pool.ReasonReservedAddresses, Message: "spec.addresses[0]: holds Node n's InternalIP 10.0.0.1"}},
		{plan.PoolResult{Name: "b", Err: overlap}, metav1.Condition{Status: metav1.ConditionFalse, Reason: pool.ReasonOverlap,
			Message: "spec.addresses[0]: 10.0.0.1 overlaps IPAddressPool a (10.0.0.0-10.0.0.9)"}},
		{plan.PoolResult{Name: "b", Err: reserved}, metav1.Condition{Status: metav1.ConditionFalse, Reason: pool.ReasonReservedAddresses,
			Message: "spec.addresses[0]: holds Node n's InternalIP 10.0.0.1"}},
		{plan.PoolResult{Name: "b", Err: invalid}, metav1.Condition{Status: metav1.ConditionFalse, Reason: pool.ReasonInvalid,
			Message: "spec.mode: bad"}},
	} {
		tc.want.Type, tc.want.ObservedGeneration = pool.ConditionAccepted, 7
		got := acceptedCondition(tc.r, 7)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.r, d)
		}
		if !sameCondition(&got, &tc.want) {
			t.Errorf("sameCondition(%v, itself) = false", got)
		}
		other := got
		other.ObservedGeneration++
		if sameCondition(&got, &other) {
			t.Errorf("sameCondition ignores observedGeneration")
		}
	}
}

// poolCondition returns the pool's ConditionAccepted and generation.
func (e *lbEnv) poolCondition(t *testing.T, name string) (*metav1.Condition, int64) {
	t.Helper()
	u, err := e.dyn.Resource(poolGVR).Get(apiCtx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get IPAddressPool %s: %v", name, err)
	}
	p, err := pool.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status == nil {
		return nil, p.Generation
	}
	return meta.FindStatusCondition(p.Status.Conditions, pool.ConditionAccepted), p.Generation
}

// waitPool waits until pool name's ConditionAccepted has status and reason
// for its current generation, and a message containing every string of want.
func (e *lbEnv) waitPool(t *testing.T, name string, status metav1.ConditionStatus, reason string, want ...string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	kubetest.Eventually(t, waitTimeout, fmt.Sprintf("IPAddressPool %s Accepted=%s (%s) %q", name, status, reason, want), func() (bool, string) {
		c, gen := e.poolCondition(t, name)
		if c == nil {
			return false, "no condition Accepted"
		}
		got = *c
		return c.Status == status && c.Reason == reason && c.ObservedGeneration == gen && containsAll(c.Message, want),
			fmt.Sprintf("%s %s gen %d/%d: %s", c.Status, c.Reason, c.ObservedGeneration, gen, c.Message)
	})
	return got
}

// waitPoolEvent waits for an Event with reason on pool name (cluster-scoped:
// its Events are in default) whose message contains every string of want.
func (e *lbEnv) waitPoolEvent(t *testing.T, name, reason string, want ...string) corev1.Event {
	t.Helper()
	var found corev1.Event
	sel := fields.Set{"involvedObject.kind": pool.Kind, "involvedObject.name": name, "reason": reason}.AsSelector().String()
	kubetest.Eventually(t, waitTimeout, fmt.Sprintf("event %s on IPAddressPool %s containing %q", reason, name, want), func() (bool, string) {
		l, err := e.Client.CoreV1().Events(metav1.NamespaceAll).List(apiCtx(t), metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, ev := range l.Items {
			msgs = append(msgs, ev.Message)
			if containsAll(ev.Message, want) {
				found = ev
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %q", msgs)
	})
	return found
}

// updatePoolAddresses sets pool name's spec.addresses (a new generation).
func (e *lbEnv) updatePoolAddresses(t *testing.T, name string, addresses ...string) {
	t.Helper()
	u, err := e.dyn.Resource(poolGVR).Get(apiCtx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"].(map[string]any)["addresses"] = toAny(addresses)
	if _, err := e.dyn.Resource(poolGVR).Update(apiCtx(t), u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update IPAddressPool %s: %v", name, err)
	}
}

// createNode creates a Node with an InternalIP and a pod CIDR.
func (e *lbEnv) createNode(t *testing.T, name, internalIP, podCIDR string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}}}
	got, err := e.Client.CoreV1().Nodes().Create(apiCtx(t), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	got.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internalIP}}
	if _, err := e.Client.CoreV1().Nodes().UpdateStatus(apiCtx(t), got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node %s status: %v", name, err)
	}
}

// startMeasuredController runs a controller with metrics until the end of the test.
func (e *lbEnv) startMeasuredController(t *testing.T, manager string) (*running, *Metrics) {
	t.Helper()
	m := NewMetrics()
	c, err := New(e.Client, e.dyn, Config{Plan: plan.Config{IsDefault: true}, FieldManager: manager, Resync: time.Minute, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return start(t, c.Run), m
}

func metricsText(m *Metrics) string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestOverlappingPoolRefused (kube tier): with pool a serving web, a pool
// applied later that overlaps it is refused, though its name sorts first:
// condition Accepted False (Overlap) naming both pools and the overlap, a
// PoolRefused Event, a metric; web's status is never rewritten and new
// Services still get a's addresses, also after a restart. Fixing the refused
// pool admits it.
func TestOverlappingPoolRefused(t *testing.T) {
	e := startEnv(t)
	e.createPool(t, "a", "172.26.236.180-172.26.236.199")
	first, m := e.startMeasuredController(t, "lb-test")
	e.createService(t, "web", "")
	web := e.waitIPs(t, "web", "172.26.236.180")
	e.waitPool(t, "a", metav1.ConditionTrue, pool.ReasonAccepted)
	e.waitPoolEvent(t, "a", ReasonPoolAccepted)

	// The apiserver's creationTimestamp has a resolution of a second.
	time.Sleep(1100 * time.Millisecond)
	e.createPool(t, "aa", "172.26.236.185-172.26.236.190")
	const overlapMsg = "spec.addresses[0]: 172.26.236.185-172.26.236.190 overlaps IPAddressPool a (172.26.236.180-172.26.236.199)"
	e.waitPool(t, "aa", metav1.ConditionFalse, pool.ReasonOverlap, overlapMsg)
	if ev := e.waitPoolEvent(t, "aa", ReasonPoolRefused, overlapMsg); ev.Type != corev1.EventTypeWarning || ev.Source.Component != Component {
		t.Errorf("PoolRefused event: type %q source %q, want Warning from %s", ev.Type, ev.Source.Component, Component)
	}
	kubetest.Eventually(t, waitTimeout, "refused metric", func() (bool, string) {
		body := metricsText(m)
		return strings.Contains(body, `svcnet_lb_pool_refused{pool="aa",reason="Overlap"} 1`), "no series for aa"
	})
	e.createService(t, "next", "")
	e.waitIPs(t, "next", "172.26.236.181")
	if c, _ := e.poolCondition(t, "a"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("a's condition %v after aa, want Accepted True", c)
	}

	if err := first.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	e.startController(t, "lb-second")
	e.createService(t, "third", "")
	e.waitIPs(t, "third", "172.26.236.182")
	e.waitPool(t, "aa", metav1.ConditionFalse, pool.ReasonOverlap, overlapMsg)
	if now := e.getService(t, "web"); now.ResourceVersion != web.ResourceVersion || !slices.Equal(ips(now), []string{"172.26.236.180"}) {
		t.Errorf("web changed: ingress %v, resourceVersion %s -> %s", ips(now), web.ResourceVersion, now.ResourceVersion)
	}
	if n := len(e.poolEvents(t, "aa", ReasonPoolRefused)); n != 1 {
		t.Errorf("%d PoolRefused events on aa after the restart, want the first one only", n)
	}

	// aa moved out of a's range: admitted at its new generation.
	e.updatePoolAddresses(t, "aa", "172.26.236.200-172.26.236.201")
	c := e.waitPool(t, "aa", metav1.ConditionTrue, pool.ReasonAccepted)
	if c.ObservedGeneration != 2 {
		t.Errorf("aa admitted at generation %d, want 2", c.ObservedGeneration)
	}
}

func (e *lbEnv) poolEvents(t *testing.T, name, reason string) []corev1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": pool.Kind, "involvedObject.name": name, "reason": reason}.AsSelector().String()
	l, err := e.Client.CoreV1().Events(metav1.NamespaceAll).List(apiCtx(t), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestPoolHoldingClusterAddressesRefused (kube tier): a pool holding a Node's
// InternalIP, or a part of the service CIDR (the apiserver's ServiceCIDR
// "kubernetes", from --service-cluster-ip-range 10.96.0.0/12), is refused
// naming which, and a plain LoadBalancer Service gets none of those
// addresses. A node added later with an address in an admitted pool moves
// nothing: the pool stays (ReservedAddresses) and that address is not handed
// out.
func TestPoolHoldingClusterAddressesRefused(t *testing.T) {
	e := startEnv(t)
	e.createNode(t, "node3", "172.26.236.179", "192.168.3.0/24")
	e.createPool(t, "nodes", "172.26.236.176-172.26.236.179")
	e.createPool(t, "services", "10.96.100.0/24")
	e.createPool(t, "pods", "192.168.3.128/25")
	e.startController(t, "lb-test")
	e.createService(t, "plain", "")
	e.waitPool(t, "nodes", metav1.ConditionFalse, pool.ReasonReservedAddresses, "spec.addresses[0]: holds Node node3's InternalIP 172.26.236.179")
	e.waitPool(t, "services", metav1.ConditionFalse, pool.ReasonReservedAddresses,
		"spec.addresses[0]: 10.96.100.0-10.96.100.255 overlaps the service CIDR 10.96.0.0/12")
	e.waitPool(t, "pods", metav1.ConditionFalse, pool.ReasonReservedAddresses,
		"spec.addresses[0]: 192.168.3.128-192.168.3.255 overlaps Node node3's podCIDR 192.168.3.0/24")
	e.waitPoolEvent(t, "nodes", ReasonPoolRefused, "Node node3's InternalIP 172.26.236.179")
	e.waitEvent(t, "plain", ReasonAllocationFailed, "no auto-assign IPAddressPool")
	if got := ips(e.getService(t, "plain")); len(got) != 0 {
		t.Fatalf("plain got %v", got)
	}

	e.createPool(t, "lab", "172.26.236.180-172.26.236.181")
	e.waitIPs(t, "plain", "172.26.236.180")
	e.waitPool(t, "lab", metav1.ConditionTrue, pool.ReasonAccepted)
	e.createNode(t, "node4", "172.26.236.181", "192.168.4.0/24")
	e.waitPool(t, "lab", metav1.ConditionTrue, pool.ReasonReservedAddresses, "holds Node node4's InternalIP 172.26.236.181")
	e.waitPoolEvent(t, "lab", ReasonPoolReservedAddresses, "Node node4's InternalIP 172.26.236.181")
	e.createService(t, "late", "")
	e.waitEvent(t, "late", ReasonAllocationFailed, "pool lab has no free IPv4 address")
	e.waitIPs(t, "plain", "172.26.236.180")
	if got := ips(e.getService(t, "late")); len(got) != 0 {
		t.Errorf("late got %v, the node's address", got)
	}
}

// servesServiceCIDRs reads discovery: served on 1.33+, absent before (the
// group version then lacks the resource, or is not served at all).
func TestServesServiceCIDRs(t *testing.T) {
	for name, tc := range map[string]struct {
		resources []*metav1.APIResourceList
		want      bool
	}{
		"served": {[]*metav1.APIResourceList{{GroupVersion: "networking.k8s.io/v1",
			APIResources: []metav1.APIResource{{Name: "ingresses"}, {Name: "servicecidrs"}}}}, true},
		"older apiserver": {[]*metav1.APIResourceList{{GroupVersion: "networking.k8s.io/v1",
			APIResources: []metav1.APIResource{{Name: "ingresses"}}}}, false},
		"no such group version": {nil, false},
	} {
		d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}}
		got, err := servesServiceCIDRs(t.Context(), d)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", name, got, err, tc.want)
		}
	}
}

// TestServesServiceCIDRsOverProtobuf (kube tier): the controller's client
// prefers protobuf, as `svcnet lb controller` configures it; discovery
// through it is still read, from a real kube-apiserver (1.36 serves
// ServiceCIDRs).
func TestServesServiceCIDRsOverProtobuf(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	cfg := rest.CopyConfig(env.Config)
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := servesServiceCIDRs(t.Context(), c.Discovery())
	if err != nil || !got {
		t.Errorf("servesServiceCIDRs over a protobuf client: %v, %v; want true", got, err)
	}
}
