//lint:file-ignore SA1019 legacy v1 Endpoints are applied as given, as kubectl applies them

package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// Apply creates or updates objects, as `kubectl apply -f` does. Pods are
// scheduled, wired and started (see applyPod). Every object is validated as the
// apiserver would validate its create before anything is done for it: an
// invalid one is refused whole, with an error naming its origin (the user's
// file and document), and leaves no file, namespace or process behind; the
// others are applied.
func (l *Lab) Apply(ctx context.Context, objs []controlplane.Object) []error {
	var errs []error
	var rest []controlplane.Object
	var pods []controlplane.Object
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b controlplane.Object) int { return cluster.ApplyOrder(a.Obj) - cluster.ApplyOrder(b.Obj) })
	for _, o := range sorted {
		obj := o.Obj.DeepCopyObject()
		m, err := cluster.MetaOf(obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.Origin, err))
			continue
		}
		if _, ok := obj.(*corev1.Node); ok {
			errs = append(errs, fmt.Errorf("%s: Node %s: the lab's nodes are its own (svcnet lab up --nodes N)", o.Origin, m.GetName()))
			continue
		}
		if namespaced, _ := controlplane.Namespaced(cluster.KindOf(obj)); namespaced && m.GetNamespace() == "" {
			m.SetNamespace(metav1.NamespaceDefault)
		}
		if _, ok := obj.(*pool.IPAddressPool); ok {
			m.SetNamespace("") // as the apiserver clears it for a cluster-scoped custom resource
		}
		o = controlplane.Object{Origin: o.Origin, Obj: obj}
		if err := controlplane.Validate(o); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, o)
		} else {
			rest = append(rest, o)
		}
	}
	if len(rest) > 0 {
		errs = append(errs, l.c.CP.Apply(ctx, rest)...)
	}
	for _, o := range pods {
		if err := l.applyPod(ctx, o.Obj.(*corev1.Pod)); err != nil {
			errs = append(errs, cluster.WithOrigin(err, o.Origin))
		}
	}
	return errs
}

// Delete deletes one object; a Pod gracefully (see DeletePod). The name (and,
// for namespaced kinds, the namespace) must be valid for the kind by the
// apiserver's rules; the namespace of a cluster-scoped kind is ignored.
func (l *Lab) Delete(ctx context.Context, kind, namespace, name string, grace time.Duration) error {
	namespaced, ok := controlplane.Namespaced(kind)
	if ok && !namespaced {
		namespace = ""
	}
	if err := controlplane.ValidateName(kind, namespace, name); err != nil {
		return err
	}
	if kind == "Pod" {
		return l.DeletePod(ctx, namespace, name, grace)
	}
	return l.c.CP.Delete(ctx, kind, namespace, name)
}

// Get returns what the control plane holds: of kinds (Service, Pod, Node;
// none: every kind) and what they depend on, or more.
func (l *Lab) Get(ctx context.Context, kinds ...string) (*controlplane.Result, error) {
	r, err := l.c.CP.Result(ctx, kinds...)
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.c.Names.Lab, err)
	}
	return r, nil
}
