package controlplane

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestReconcilerMatchesReconcile: a Reconciler gives what Reconcile gives,
// call after call, as objects are replaced (a valid one by an invalid one
// and back), removed and given again; it remembers only its last call.
func TestReconcilerMatchesReconcile(t *testing.T) {
	objs := cluster()
	var r Reconciler
	check := func(step string, objs []Object, prev State) Result {
		t.Helper()
		got := r.Reconcile(dualStack, objs, prev, testNow)
		want := Reconcile(dualStack, objs, prev, testNow)
		if diff := cmp.Diff(want, got, sameErrorText); diff != "" {
			t.Fatalf("%s: Reconciler differs from Reconcile (-want +got):\n%s", step, diff)
		}
		return got
	}
	first := check("first", objs, State{})
	check("again", objs, first.State)

	i := slices.IndexFunc(objs, func(o Object) bool {
		s, ok := o.Obj.(*corev1.Service)
		return ok && s.Name == "api"
	})
	if i < 0 {
		t.Fatal("no Service api in the cluster")
	}
	bad := slices.Clone(objs)
	b := objs[i].Obj.(*corev1.Service).DeepCopy()
	b.Spec.Ports[0].Port = 0
	bad[i].Obj = b
	res := check("api made invalid", bad, first.State)
	if !slices.ContainsFunc(res.Errors, func(e *ObjectError) bool { return e.Name == "api" }) {
		t.Fatalf("api with port 0 is not an error: %v", errorStrings(res))
	}
	check("api back", objs, res.State)
	check("api removed", slices.Delete(slices.Clone(objs), i, i+1), first.State)
	check("api given again", objs, first.State)
	if got, want := len(r.memo.last), len(objs); got != want {
		t.Errorf("Reconciler remembers %d objects, want the %d of its last call", got, want)
	}
}
