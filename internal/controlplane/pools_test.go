package controlplane

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

// reconcileAt reconciles objs (origin objN.yaml) on prev at now.
func reconcileAt(objs []runtimeObject, prev State, now time.Time) Result {
	return Reconcile(DefaultConfig(), toObjects(objs...), prev, now)
}

// poolNames returns the names of the admitted pools.
func poolNames(res Result) []string {
	var out []string
	for _, p := range res.Pools {
		out = append(out, p.Name)
	}
	return out
}

// errorTexts returns every error's text.
func errorTexts(errs []*ObjectError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// A pool applied after another it overlaps is refused, whatever the names (the
// older one was dropped when the newer sorted first by name); the error is the
// newer pool's own, from its own file, naming both pools and the overlap; the
// older pool keeps every allocation and serves new Services, run after run.
func TestNewerOverlappingPoolRefused(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	lab := addrPool("lab", "172.26.236.180-172.26.236.199")
	first := reconcileAt([]runtimeObject{lab, svc("web", lb)}, State{}, testNow)
	if len(first.Errors) != 0 {
		t.Fatalf("errors: %v", first.Errors)
	}
	if got := strings.Join(lbIPs(t, first, "web"), ","); got != "172.26.236.180" {
		t.Fatalf("web: %s, want 172.26.236.180", got)
	}
	if d := cmp.Diff(map[string][]string{"lab": {"172.26.236.180-172.26.236.199"}}, first.State.Pools); d != "" {
		t.Errorf("state pools (-want +got):\n%s", d)
	}

	// "a" sorts before "lab" and takes .180 when it wins.
	newer := addrPool("a", "172.26.236.175-172.26.236.185")
	objs := []runtimeObject{lab, svc("web", lb), newer, svc("next", lb)}
	st := first.State
	for i, now := range []time.Time{testNow.Add(time.Minute), testNow.Add(time.Hour), testNow.Add(48 * time.Hour)} {
		res := reconcileAt(objs, st, now)
		want := []string{"obj2.yaml: IPAddressPool a: spec.addresses[0]: 172.26.236.180-172.26.236.185 overlaps IPAddressPool lab (172.26.236.180-172.26.236.199)"}
		if d := cmp.Diff(want, errorTexts(res.Errors)); d != "" {
			t.Fatalf("run %d: errors (-want +got):\n%s", i, d)
		}
		if e := res.Errors[0]; e.Origin != "obj2.yaml" || !errors.Is(e, pool.ErrOverlap) {
			t.Errorf("run %d: error origin %q, overlap %v; want obj2.yaml, true", i, e.Origin, errors.Is(e, pool.ErrOverlap))
		}
		var pe *pool.Error
		if !errors.As(res.Errors[0], &pe) || pe.Pool != "a" || pe.Other != "lab" {
			t.Errorf("run %d: %v: not a *pool.Error of a against lab", i, res.Errors[0])
		}
		if d := cmp.Diff([]string{"lab"}, poolNames(res)); d != "" {
			t.Errorf("run %d: admitted pools (-want +got):\n%s", i, d)
		}
		if got := strings.Join(lbIPs(t, res, "web"), ","); got != "172.26.236.180" {
			t.Errorf("run %d: web moved to %s", i, got)
		}
		if got := strings.Join(lbIPs(t, res, "next"), ","); got != "172.26.236.181" {
			t.Errorf("run %d: next got %s, want 172.26.236.181 from lab", i, got)
		}
		if _, ok := res.State.Pools["a"]; ok {
			t.Errorf("run %d: the refused pool is recorded: %v", i, res.State.Pools)
		}
		st = res.State
	}

	// Once the older pool is gone, the other is admitted and recorded.
	res := reconcileAt([]runtimeObject{newer, svc("web", lb)}, st, testNow.Add(49*time.Hour))
	if len(res.Errors) != 0 || !cmp.Equal([]string{"a"}, poolNames(res)) {
		t.Fatalf("after lab's deletion: errors %v, pools %v", res.Errors, poolNames(res))
	}
	if d := cmp.Diff(map[string][]string{"a": {"172.26.236.175-172.26.236.185"}}, res.State.Pools); d != "" {
		t.Errorf("state pools (-want +got):\n%s", d)
	}
}

// Two new pools that overlap, applied together: the earlier creation time, then
// the name, decides; the state makes the choice stick when a restart sees them
// the other way round.
func TestOverlappingPoolsSameRun(t *testing.T) {
	b, a := addrPool("b", "10.0.0.0/24"), addrPool("a", "10.0.0.0/25")
	res := reconcileAt([]runtimeObject{b, a}, State{}, testNow)
	if d := cmp.Diff([]string{"a"}, poolNames(res)); d != "" {
		t.Fatalf("admitted (-want +got):\n%s", d)
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "IPAddressPool b: spec.addresses[0]: 10.0.0.0-10.0.0.127 overlaps IPAddressPool a") {
		t.Fatalf("errors: %v", res.Errors)
	}
	// A restart with b given a creation time before a's: a is established.
	older := addrPool("b", "10.0.0.0/24")
	older.CreationTimestamp.Time = testNow.Add(-time.Hour)
	again := reconcileAt([]runtimeObject{older, a}, res.State, testNow.Add(time.Hour))
	if d := cmp.Diff([]string{"a"}, poolNames(again)); d != "" {
		t.Errorf("after restart, admitted (-want +got):\n%s", d)
	}
}

// An edit of an admitted pool that makes it overlap another is the newer
// object: the edit is refused (the pool's previous record stays), the other
// pool keeps its allocations; undoing the edit admits the pool again.
func TestEditedPoolRefused(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	east, west := addrPool("east", "10.0.0.0/28"), addrPool("west", "10.0.0.16/28")
	wants := func(name, p string) *corev1.Service {
		return svc(name, lb, func(s *corev1.Service) { s.Annotations = map[string]string{"svcnet.io/address-pool": p} })
	}
	first := reconcileAt([]runtimeObject{east, west, wants("e", "east"), wants("w", "west")}, State{}, testNow)
	if len(first.Errors) != 0 {
		t.Fatalf("errors: %v", first.Errors)
	}
	edited := addrPool("east", "10.0.0.0/27")
	res := reconcileAt([]runtimeObject{edited, west, wants("e", "east"), wants("w", "west")}, first.State, testNow.Add(time.Minute))
	want := []string{"obj0.yaml: IPAddressPool east: spec.addresses[0]: 10.0.0.16-10.0.0.31 overlaps IPAddressPool west (10.0.0.16-10.0.0.31)"}
	if d := cmp.Diff(want, errorTexts(res.Errors)); d != "" {
		t.Fatalf("errors (-want +got):\n%s", d)
	}
	if got := strings.Join(lbIPs(t, res, "w"), ","); got != "10.0.0.16" {
		t.Errorf("w: %s, want 10.0.0.16 kept", got)
	}
	if d := cmp.Diff([]string{"10.0.0.0-10.0.0.15"}, res.State.Pools["east"]); d != "" {
		t.Errorf("east's record (-want +got):\n%s", d)
	}
	back := reconcileAt([]runtimeObject{east, west, wants("e", "east"), wants("w", "west")}, res.State, testNow.Add(2*time.Minute))
	if len(back.Errors) != 0 || !cmp.Equal([]string{"east", "west"}, poolNames(back)) {
		t.Errorf("undone: errors %v, pools %v", back.Errors, poolNames(back))
	}
}

// A pool holding a node's address, a node's pod CIDR or the service CIDR is
// refused naming which; a plain LoadBalancer Service never gets such an address.
func TestPoolHoldingClusterAddressesRefused(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	n3 := node("node3", "")
	n3.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.26.236.179"}, {Type: corev1.NodeHostName, Address: "node3"}}
	n3.Spec.PodCIDR, n3.Spec.PodCIDRs = "192.168.3.0/24", []string{"192.168.3.0/24"}
	res := reconcileAt([]runtimeObject{n3,
		addrPool("nodes", "172.26.236.176-172.26.236.179"),
		addrPool("pods", "192.168.3.0/28"),
		addrPool("services", "10.96.200.0/24"),
		svc("plain", lb),
	}, State{}, testNow)
	want := []string{
		"obj1.yaml: IPAddressPool nodes: spec.addresses[0]: holds Node node3's InternalIP 172.26.236.179",
		"obj2.yaml: IPAddressPool pods: spec.addresses[0]: 192.168.3.0-192.168.3.15 overlaps Node node3's podCIDR 192.168.3.0/24",
		"obj3.yaml: IPAddressPool services: spec.addresses[0]: 10.96.200.0-10.96.200.255 overlaps the service CIDR 10.96.0.0/12",
	}
	if d := cmp.Diff(want, errorTexts(res.Errors)); d != "" {
		t.Fatalf("errors (-want +got):\n%s", d)
	}
	for _, e := range res.Errors {
		if !errors.Is(e, pool.ErrReserved) {
			t.Errorf("%v does not wrap pool.ErrReserved", e)
		}
	}
	if got := lbIPs(t, res, "plain"); len(got) != 0 {
		t.Errorf("plain got %v", got)
	}
	if len(res.Pools) != 0 || len(res.State.Pools) != 0 {
		t.Errorf("pools %v, state %v: want none admitted", poolNames(res), res.State.Pools)
	}
}

// A node that appears with an address inside an admitted pool does not move
// anything: the pool stays, the Service holding that address keeps it (with a
// warning naming the pool and the node), and no Service is newly given it.
func TestNodeAddedIntoAdmittedPool(t *testing.T) {
	lb := withType(corev1.ServiceTypeLoadBalancer)
	lab := addrPool("lab", "172.26.236.180-172.26.236.181")
	first := reconcileAt([]runtimeObject{lab, svc("a", lb), svc("b", lb)}, State{}, testNow)
	if got := strings.Join(lbIPs(t, first, "b"), ","); got != "172.26.236.181" {
		t.Fatalf("b: %s", got)
	}
	n4 := node("node4", "")
	n4.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.26.236.181"}}
	objs := []runtimeObject{lab, svc("a", lb), svc("b", lb), n4}
	res := reconcileAt(objs, first.State, testNow.Add(time.Minute))
	if len(res.Errors) != 0 || !cmp.Equal([]string{"lab"}, poolNames(res)) {
		t.Fatalf("errors %v, pools %v", res.Errors, poolNames(res))
	}
	if got := strings.Join(lbIPs(t, res, "b"), ","); got != "172.26.236.181" {
		t.Errorf("b: %s, want 172.26.236.181 kept", got)
	}
	want := []string{"obj0.yaml: IPAddressPool lab: spec.addresses[0]: holds Node node4's InternalIP 172.26.236.181; " +
		"these addresses are not handed out; a Service that holds one keeps it"}
	if d := cmp.Diff(want, errorTexts(res.Warnings)); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
	// b goes away: nobody gets the node's address.
	res = reconcileAt([]runtimeObject{lab, svc("a", lb), svc("c", lb), n4}, res.State, testNow.Add(2*time.Minute))
	if got := lbIPs(t, res, "c"); len(got) != 0 {
		t.Errorf("c got %v, the node's address", got)
	}
}
