package controlplane

import (
	"fmt"
	goruntime "runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestPrevalidateSameAsOneByOne: a reconcile of enough objects to validate
// them on every CPU (Services, EndpointSlices, Pods, every tenth invalid)
// gives the Result of one CPU, through Reconcile and through a Reconciler
// (whose memory of the validations then serves a second call unchanged).
func TestPrevalidateSameAsOneByOne(t *testing.T) {
	var objs []runtime.Object
	for i := range 3 * prevalidateMin {
		name := fmt.Sprintf("s%04d", i)
		port := int32(80)
		if i%10 == 3 {
			port = 0 // invalid
		}
		objs = append(objs, svc(name, noSelector, withPorts(corev1.ServicePort{Name: "http", Port: port})),
			plainSlice(name+"-1", name, fmt.Sprintf("10.3.%d.%d", i/250, i%250+1)))
		if i%10 == 5 {
			objs = append(objs, plainSlice(name+"-bad", name, "not-an-ip"))
		}
		p := pod(fmt.Sprintf("p%04d", i), "web", fmt.Sprintf("192.168.%d.%d", i/250, i%250+1))
		if i%10 == 7 {
			p.Name = "Not_A_Name"
		}
		objs = append(objs, p)
	}
	in := toObjects(objs...)
	if goruntime.GOMAXPROCS(0) < 2 {
		goruntime.GOMAXPROCS(2)
		defer goruntime.GOMAXPROCS(1)
	}
	parallel := Reconcile(dualStack, in, State{}, testNow)
	var r Reconciler
	viaReconciler := r.Reconcile(dualStack, in, State{}, testNow)
	again := r.Reconcile(dualStack, in, viaReconciler.State, testNow)
	prev := goruntime.GOMAXPROCS(1)
	one := Reconcile(dualStack, in, State{}, testNow)
	oneAgain := Reconcile(dualStack, in, one.State, testNow)
	goruntime.GOMAXPROCS(prev)
	if len(one.Errors) < 3*prevalidateMin/10 {
		t.Fatalf("%d errors; want the invalid objects' (a tenth of each kind and more)", len(one.Errors))
	}
	for name, got := range map[string]Result{"Reconcile": parallel, "a Reconciler": viaReconciler} {
		if diff := cmp.Diff(one, got, sameErrorText); diff != "" {
			t.Errorf("%s on every CPU differs from one CPU (-one +every):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(oneAgain, again, sameErrorText); diff != "" {
		t.Errorf("a Reconciler's second call differs (-one CPU +Reconciler):\n%s", diff)
	}
}
