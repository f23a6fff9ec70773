package describe

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// listChunk is kubectl describe's --chunk-size default: lists are read in
// pages of this many items.
const listChunk = 500

// Client reads from an API server, with the requests kubectl describe
// makes (the same field and label selectors).
type Client struct{ C kubernetes.Interface }

var _ Reader = Client{}

func notFound[T any](v *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (c Client) Service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	return notFound(c.C.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{}))
}

func (c Client) EndpointSlices(ctx context.Context, namespace, service string) ([]discoveryv1.EndpointSlice, error) {
	l, err := c.C.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: fields.OneTermEqualSelector(discoveryv1.LabelServiceName, service).String()})
	if err != nil {
		return nil, fmt.Errorf("listing endpointslices: %w", err)
	}
	return l.Items, nil
}

func (c Client) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return notFound(c.C.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}))
}

func (c Client) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return notFound(c.C.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}))
}

func (c Client) PodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error) {
	sel := fields.AndSelectors(
		fields.OneTermEqualSelector("spec.nodeName", node),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))
	var out []corev1.Pod
	opts := metav1.ListOptions{FieldSelector: sel.String(), Limit: listChunk}
	for {
		l, err := c.C.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing pods: %w", err)
		}
		out = append(out, l.Items...)
		if opts.Continue = l.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

func (c Client) Lease(ctx context.Context, node string) (*coordinationv1.Lease, error) {
	return c.C.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
}

func (c Client) Events(ctx context.Context, kind, namespace, name string, uid types.UID) ([]corev1.Event, error) {
	var k, u *string
	if kind != "" {
		k = &kind
	}
	if uid != "" {
		s := string(uid)
		u = &s
	}
	e := c.C.CoreV1().Events(namespace)
	var out []corev1.Event
	opts := metav1.ListOptions{FieldSelector: e.GetFieldSelector(&name, &namespace, k, u).String(), Limit: listChunk}
	for {
		l, err := e.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing events: %w", err)
		}
		out = append(out, l.Items...)
		if opts.Continue = l.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

func (c Client) List(ctx context.Context, resource, namespace string, sel labels.Selector) ([]types.NamespacedName, error) {
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: listChunk}
	var out []types.NamespacedName
	for {
		var items []metav1.Object
		var cont string
		switch resource {
		case "services":
			l, err := c.C.CoreV1().Services(namespace).List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("listing services: %w", err)
			}
			items, cont = metas(l.Items), l.Continue
		case "pods":
			l, err := c.C.CoreV1().Pods(namespace).List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("listing pods: %w", err)
			}
			items, cont = metas(l.Items), l.Continue
		case "nodes":
			l, err := c.C.CoreV1().Nodes().List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("listing nodes: %w", err)
			}
			items, cont = metas(l.Items), l.Continue
		default:
			return nil, fmt.Errorf("unknown resource %q", resource)
		}
		for _, m := range items {
			out = append(out, types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()})
		}
		if opts.Continue = cont; cont == "" {
			return out, nil
		}
	}
}

// metas are the items' object metadata.
func metas[T any, P interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}
