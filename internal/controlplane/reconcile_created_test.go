package controlplane

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Objects other than Services keep the time they were first seen across runs, so
// `svcnet get` shows a real AGE; one that names its own creationTimestamp keeps it.
func TestCreationTimesPersist(t *testing.T) {
	given := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	objs := func() []Object {
		return []Object{
			{Origin: "n", Obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}},
			{Origin: "p", Obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default", CreationTimestamp: metav1.NewTime(given)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
		}
	}
	first := Reconcile(Config{}, objs(), State{}, testNow)
	later := Reconcile(Config{}, objs(), first.State, testNow.Add(48*time.Hour))
	if got := later.Nodes[0].CreationTimestamp.Time; !got.Equal(testNow) {
		t.Fatalf("node created %v, want the first run's %v", got, testNow)
	}
	if got := later.Pods[0].CreationTimestamp.Time; !got.Equal(given) {
		t.Fatalf("pod created %v, want its own %v", got, given)
	}
	if _, ok := later.State.Created["Node/n1"]; !ok {
		t.Fatalf("state lacks Node/n1: %v", later.State.Created)
	}
	gone := Reconcile(Config{}, nil, later.State, testNow)
	if _, ok := gone.State.Created["Node/n1"]; ok {
		t.Fatal("a removed node is still in the state")
	}
}
