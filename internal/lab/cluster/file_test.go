package cluster

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// A File reads what it last published instead of loading objects/ again,
// but never once objects/ or cluster.yaml changed: not after another
// process's apply (another File on the same lab), nor after a write of
// its own that was not published (a Pod created without status).
func TestFileResultFollowsOtherWriters(t *testing.T) {
	netnstest.RequireRoot(t) // the lab's state is under /run/svcnet/lab
	n := topology.Names{Lab: fmt.Sprintf("fres%d", os.Getpid()%100000)}
	t.Cleanup(func() { _ = os.RemoveAll(n.Dir()) })
	ctx := context.Background()
	a, b := NewFile(n, nil), NewFile(n, nil)
	if err := a.RegisterNodes(ctx, []*corev1.Node{Node(nil, 1)}); err != nil {
		t.Fatal(err)
	}
	svc := func(name string) controlplane.Object {
		return controlplane.Object{Origin: name + ".yaml", Obj: &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}}
	}
	names := func(f *File) map[string]bool {
		t.Helper()
		r, err := f.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, s := range r.Services {
			out[s.Name] = true
		}
		for _, p := range r.Pods {
			out["pod/"+p.Name] = true
		}
		return out
	}
	if errs := a.Apply(ctx, []controlplane.Object{svc("one")}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if a.current() == nil || !names(a)["one"] {
		t.Fatalf("after its own apply: cached %v, Services %v", a.current() != nil, names(a))
	}
	if errs := b.Apply(ctx, []controlplane.Object{svc("two")}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := names(a); !got["one"] || !got["two"] {
		t.Fatalf("after another File's apply, a sees %v; want one and two", got)
	}
	if err := a.CreatePod(ctx, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
		Spec:       corev1.PodSpec{NodeName: topology.NodeName(1), Containers: []corev1.Container{{Name: "c", Image: "x"}}}}); err != nil {
		t.Fatal(err)
	}
	if !names(a)["pod/p"] {
		t.Fatalf("a Pod created without status is missing from Result: %v", names(a))
	}
}

// A File that loads for a reader of some kinds reads only those and what
// they depend on: the same Services, without the Pods or the
// EndpointSlices a reader of every kind gets.
func TestFileResultOfKinds(t *testing.T) {
	netnstest.RequireRoot(t) // the lab's state is under /run/svcnet/lab
	n := topology.Names{Lab: fmt.Sprintf("fkind%d", os.Getpid()%100000)}
	t.Cleanup(func() { _ = os.RemoveAll(n.Dir()) })
	ctx := context.Background()
	w := NewFile(n, nil)
	if err := w.RegisterNodes(ctx, []*corev1.Node{Node(nil, 1)}); err != nil {
		t.Fatal(err)
	}
	web := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	if errs := w.Apply(ctx, []controlplane.Object{{Origin: "web.yaml", Obj: web}}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := w.CreatePod(ctx, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: topology.NodeName(1), Containers: []corev1.Container{{Name: "c", Image: "x"}}}}); err != nil {
		t.Fatal(err)
	}
	all, err := NewFile(n, nil).Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Pods) != 1 || len(all.EndpointSlices) == 0 {
		t.Fatalf("every kind: %d Pods, %d EndpointSlices; want the Pod and web's slice", len(all.Pods), len(all.EndpointSlices))
	}
	svcs, err := NewFile(n, nil).Result(ctx, "Service")
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs.Pods) != 0 || len(svcs.EndpointSlices) != 0 {
		t.Errorf("Services: %d Pods, %d EndpointSlices; want none", len(svcs.Pods), len(svcs.EndpointSlices))
	}
	if !reflect.DeepEqual(svcs.Services, all.Services) || !reflect.DeepEqual(svcs.Nodes, all.Nodes) {
		t.Errorf("Services or Nodes differ from a read of every kind:\n%v\n%v", svcs.Services, all.Services)
	}
}
