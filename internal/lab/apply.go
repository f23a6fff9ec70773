//lint:file-ignore SA1019 legacy v1 Endpoints are applied as given, as kubectl applies them

package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// applyOrder is the order objects are applied in, as kubectl's: namespaces before
// what lives in them, Services before the Pods that back them.
func applyOrder(o runtime.Object) int {
	switch o.(type) {
	case *corev1.Namespace:
		return 0
	case *corev1.Service:
		return 1
	case *corev1.Endpoints, *discoveryv1.EndpointSlice:
		return 2
	case *corev1.Pod:
		return 3
	}
	return 4
}

// Apply creates or updates objects, as `kubectl apply -f` does. Pods are
// scheduled, wired and started (see applyPod). Each object that cannot be applied
// yields an error naming it; the others are applied.
func (l *Lab) Apply(ctx context.Context, objs []controlplane.Object) []error {
	var errs []error
	var rest []runtime.Object
	var pods []*corev1.Pod
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b controlplane.Object) int { return applyOrder(a.Obj) - applyOrder(b.Obj) })
	for _, o := range sorted {
		obj := o.Obj.DeepCopyObject()
		m, err := metaOf(obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.Origin, err))
			continue
		}
		switch obj.(type) {
		case *corev1.Node:
			errs = append(errs, fmt.Errorf("%s: Node %s: the lab's nodes are its own (svcnet lab up --nodes N)", o.Origin, m.GetName()))
			continue
		case *corev1.Namespace, *pool.IPAddressPool: // cluster-scoped
		default:
			if m.GetNamespace() == "" {
				m.SetNamespace(metav1.NamespaceDefault)
			}
		}
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
		} else {
			rest = append(rest, obj)
		}
	}
	if len(rest) > 0 {
		errs = append(errs, l.cluster.Apply(ctx, rest)...)
	}
	for _, p := range pods {
		if err := l.applyPod(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Delete deletes one object; a Pod gracefully (see DeletePod).
func (l *Lab) Delete(ctx context.Context, kind, namespace, name string, grace time.Duration) error {
	if kind == "Pod" {
		return l.DeletePod(ctx, namespace, name, grace)
	}
	if kind == "Namespace" {
		namespace = ""
	}
	return l.cluster.Delete(ctx, kind, namespace, name)
}

// Get returns what the control plane holds.
func (l *Lab) Get(ctx context.Context) (*controlplane.Result, error) {
	r, err := l.cluster.Result(ctx)
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.names.Lab, err)
	}
	return r, nil
}

// errNotFound marks lookups of objects that do not exist.
var errNotFound = errors.New("not found")
