package controlplane

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

// copies returns a deep copy of objs in which an object given twice is
// still one object, as a decode cache gives identical documents.
func copies(objs []Object) []Object {
	seen := map[runtimeObject]runtimeObject{}
	out := make([]Object, len(objs))
	for i, o := range objs {
		c, ok := seen[o.Obj]
		if !ok {
			c = o.Obj.DeepCopyObject()
			seen[o.Obj] = c
		}
		out[i] = Object{Origin: o.Origin, Obj: c}
	}
	return out
}

// TestReconcileOwned: a reconcile that takes its objects gives what one
// that copies them gives, and holds the objects given: the first time an
// object is given, not the second (a duplicate, here, whose error must
// read the same).
func TestReconcileOwned(t *testing.T) {
	objs := cluster()
	web := objs[0].Obj.(*corev1.Service)
	objs = append(objs, Object{Origin: "again.yaml", Obj: web})
	want := Reconcile(dualStack, objs, State{}, testNow)
	if !strings.Contains(strings.Join(errorStrings(want), "\n"), "again.yaml") {
		t.Fatalf("errors %v: want the second web a duplicate", errorStrings(want))
	}
	given := copies(objs)
	got := ReconcileScoped(dualStack, given, State{}, testNow, Scope{Owned: true})
	if diff := cmp.Diff(canonical(t, want), canonical(t, got)); diff != "" {
		t.Fatalf("owned reconcile differs (-copied +owned):\n%s", diff)
	}
	if s := findService(t, got, "default", "web"); s != given[0].Obj {
		t.Errorf("web is a copy, want the object given")
	}
	if again := Reconcile(dualStack, objs, State{}, testNow); canonical(t, again) != canonical(t, want) {
		t.Errorf("a reconcile that copies changed its input")
	}
}

// TestReconcileNoEndpointSlices: without EndpointSlices a reconcile gives
// what a whole one gives but the slices and their creation times; with a
// pool of mode node-ip (whose addresses follow the nodes with a ready
// endpoint) it builds them all the same.
func TestReconcileNoEndpointSlices(t *testing.T) {
	objs := cluster()
	prev := Reconcile(dualStack, objs, State{}, testNow).State
	whole := Reconcile(dualStack, objs, prev, testNow)
	if len(whole.EndpointSlices) == 0 {
		t.Fatal("the cluster has no EndpointSlices to leave out")
	}
	want := whole
	want.EndpointSlices = nil
	want.State.Created = maps.Clone(whole.State.Created)
	maps.DeleteFunc(want.State.Created, func(k string, _ time.Time) bool { return strings.HasPrefix(k, kindEndpointSlice+"/") })
	got := ReconcileScoped(dualStack, objs, prev, testNow, Scope{NoEndpointSlices: true})
	if diff := cmp.Diff(canonical(t, want), canonical(t, got)); diff != "" {
		t.Fatalf("reconcile without slices differs (-whole less slices +scoped):\n%s", diff)
	}

	np := &pool.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "nodes"}, Spec: pool.IPAddressPoolSpec{Mode: "node-ip"}}
	objs = append(objs, Object{Origin: "pool.yaml", Obj: np})
	whole = Reconcile(dualStack, objs, prev, testNow)
	got = ReconcileScoped(dualStack, objs, prev, testNow, Scope{NoEndpointSlices: true})
	if diff := cmp.Diff(canonical(t, whole), canonical(t, got)); diff != "" {
		t.Fatalf("with a node-ip pool, reconcile without slices differs (-whole +scoped):\n%s", diff)
	}
}
