package cluster

import (
	"context"
	"fmt"
	"os"
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
