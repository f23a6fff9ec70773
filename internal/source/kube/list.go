package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// Resources name what List lists.
const (
	Services       = "services"
	EndpointSlices = "endpointslices"
	Nodes          = "nodes"
	Pods           = "pods"
	Endpoints      = "endpoints"
	Events         = "events"
)

// List lists the named resources ("" in namespace: every namespace; Nodes are
// cluster-scoped) into a Result, each object with its TypeMeta set as kubectl
// prints it.
func List(ctx context.Context, client kubernetes.Interface, namespace string, resources ...string) (*controlplane.Result, error) {
	var r controlplane.Result
	lo := metav1.ListOptions{}
	for _, res := range resources {
		switch res {
		case Services:
			l, err := client.CoreV1().Services(namespace).List(ctx, lo)
			if err != nil {
				return nil, fmt.Errorf("listing services: %w", err)
			}
			r.Services = ptrs(l.Items, "Service", corev1.SchemeGroupVersion.String())
		case EndpointSlices:
			l, err := client.DiscoveryV1().EndpointSlices(namespace).List(ctx, lo)
			if err != nil {
				return nil, fmt.Errorf("listing endpointslices: %w", err)
			}
			r.EndpointSlices = ptrs(l.Items, "EndpointSlice", discoveryv1.SchemeGroupVersion.String())
		case Nodes:
			l, err := client.CoreV1().Nodes().List(ctx, lo)
			if err != nil {
				return nil, fmt.Errorf("listing nodes: %w", err)
			}
			r.Nodes = ptrs(l.Items, "Node", corev1.SchemeGroupVersion.String())
		case Pods:
			l, err := client.CoreV1().Pods(namespace).List(ctx, lo)
			if err != nil {
				return nil, fmt.Errorf("listing pods: %w", err)
			}
			r.Pods = ptrs(l.Items, "Pod", corev1.SchemeGroupVersion.String())
		case Endpoints:
			l, err := client.CoreV1().Endpoints(namespace).List(ctx, lo)
			if err != nil {
				return nil, fmt.Errorf("listing endpoints: %w", err)
			}
			r.Endpoints = ptrs(l.Items, "Endpoints", corev1.SchemeGroupVersion.String())
		case Events:
			l, err := client.CoreV1().Events(namespace).List(ctx, lo)
			if err != nil {
				return nil, fmt.Errorf("listing events: %w", err)
			}
			r.Events = l.Items
		default:
			return nil, fmt.Errorf("list: unknown resource %q", res)
		}
	}
	return &r, nil
}

// ptrs returns pointers to the items with their TypeMeta set.
func ptrs[T any, P interface {
	*T
	runtime.Object
}](items []T, kind, apiVersion string) []P {
	out := make([]P, len(items))
	for i := range items {
		p := P(&items[i])
		p.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
		out[i] = p
	}
	return out
}

// ListPools lists svcnet lb's IPAddressPools (svcnet.io/v1alpha1) through the
// dynamic client, sorted by name. A cluster without the CRD has none: NotFound
// gives an empty list.
func ListPools(ctx context.Context, dyn dynamic.Interface) ([]*pool.IPAddressPool, error) {
	l, err := dyn.Resource(pool.SchemeGroupVersion.WithResource(pool.Resource)).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing ipaddresspools: %w", err)
	}
	out := make([]*pool.IPAddressPool, 0, len(l.Items))
	for i := range l.Items {
		p, err := pool.FromUnstructured(&l.Items[i])
		if err != nil {
			return nil, fmt.Errorf("IPAddressPool %s: %w", l.Items[i].GetName(), err)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pool.IPAddressPool) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
