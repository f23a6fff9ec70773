package describe

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// Held reads what the embedded control plane holds (R) and the events
// recorded beside it.
type Held struct {
	R        *controlplane.Result
	Recorded []corev1.Event
}

var _ Reader = Held{}

func find[T interface {
	GetNamespace() string
	GetName() string
}](list []T, namespace, name string) T {
	var zero T
	for _, o := range list {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return zero
}

func (h Held) Service(_ context.Context, namespace, name string) (*corev1.Service, error) {
	return find(h.R.Services, namespace, name), nil
}

func (h Held) EndpointSlices(_ context.Context, namespace, service string) ([]discoveryv1.EndpointSlice, error) {
	var out []discoveryv1.EndpointSlice
	for _, s := range h.R.EndpointSlices {
		if s.Namespace == namespace && s.Labels[discoveryv1.LabelServiceName] == service {
			out = append(out, *s)
		}
	}
	return out, nil
}

func (h Held) Pod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	return find(h.R.Pods, namespace, name), nil
}

func (h Held) Node(_ context.Context, name string) (*corev1.Node, error) {
	return find(h.R.Nodes, "", name), nil
}

func (h Held) PodsOnNode(_ context.Context, node string) ([]corev1.Pod, error) {
	var out []corev1.Pod
	for _, p := range h.R.Pods {
		if p.Spec.NodeName == node && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, *p)
		}
	}
	return out, nil
}

// Lease: the embedded control plane keeps no leases; the answer is the
// API server's for a node without one.
func (h Held) Lease(_ context.Context, node string) (*coordinationv1.Lease, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: coordinationv1.GroupName, Resource: "leases"}, node)
}

func (h Held) Events(_ context.Context, kind, namespace, name string, uid types.UID) ([]corev1.Event, error) {
	return EventsOf(h.Recorded, kind, namespace, name, uid), nil
}

func (h Held) List(_ context.Context, resource, namespace string, sel labels.Selector) ([]types.NamespacedName, error) {
	var objs []metav1.Object
	switch resource {
	case "services":
		objs = each(h.R.Services)
	case "pods":
		objs = each(h.R.Pods)
	case "nodes":
		objs, namespace = each(h.R.Nodes), ""
	default:
		return nil, fmt.Errorf("unknown resource %q", resource)
	}
	var out []types.NamespacedName
	for _, o := range objs {
		if (namespace == "" || o.GetNamespace() == namespace) && sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

func each[T metav1.Object](list []T) []metav1.Object {
	out := make([]metav1.Object, len(list))
	for i, o := range list {
		out[i] = o
	}
	return out
}
