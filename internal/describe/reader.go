package describe

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/kubectlget"
)

// Reader reads what a description needs. A missing object is (nil, nil).
type Reader interface {
	Service(ctx context.Context, namespace, name string) (*corev1.Service, error)
	// EndpointSlices are the slices labelled with the Service's name
	// (kubernetes.io/service-name).
	EndpointSlices(ctx context.Context, namespace, service string) ([]discoveryv1.EndpointSlice, error)
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Node(ctx context.Context, name string) (*corev1.Node, error)
	// PodsOnNode are the node's pods that have not terminated (phase
	// neither Succeeded nor Failed), in every namespace.
	PodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error)
	// Lease is the node's heartbeat lease (kube-node-lease/NAME); an error
	// is shown in its place.
	Lease(ctx context.Context, node string) (*coordinationv1.Lease, error)
	// Events are the events about the object of kind (empty: any)
	// namespace/name with uid (see EventsOf).
	Events(ctx context.Context, kind, namespace, name string, uid types.UID) ([]corev1.Event, error)
	// List names the objects of resource ("services", "pods", "nodes") in
	// namespace ("" for every one; ignored for nodes) whose labels match
	// sel, sorted by namespace and name.
	List(ctx context.Context, resource, namespace string, sel labels.Selector) ([]types.NamespacedName, error)
}

// Resource returns the plural resource a TYPE argument names (svc,
// service, services, po, no, ...), or an error naming the types describe
// knows.
func Resource(typ string) (string, error) {
	switch r := kubectlget.Resource(typ); r {
	case "services", "pods", "nodes":
		return r, nil
	}
	return "", fmt.Errorf("describe knows services (svc), pods (po) and nodes (no), not %q", typ)
}

// describe returns kubectl describe's text of the object of resource
// namespace/name (a node's namespace is ignored) read through r, with its
// events when showEvents, their ages counted at now; found is false when
// the object does not exist.
func describe(ctx context.Context, r Reader, resource, namespace, name string, showEvents bool, now time.Time) (text string, found bool, err error) {
	events := func(kind, namespace, name string, uids ...types.UID) ([]corev1.Event, error) {
		if !showEvents {
			return nil, nil
		}
		all := []corev1.Event{}
		for _, uid := range uids {
			e, err := r.Events(ctx, kind, namespace, name, uid)
			if err != nil {
				return nil, err
			}
			all = append(all, e...)
		}
		return all, nil
	}
	switch resource {
	case "services":
		svc, err := r.Service(ctx, namespace, name)
		if err != nil || svc == nil {
			return "", false, err
		}
		slices, err := r.EndpointSlices(ctx, namespace, name)
		if err != nil {
			return "", false, err
		}
		ev, err := events("Service", namespace, name, svc.UID)
		if err != nil {
			return "", false, err
		}
		return Service(svc, slices, ev, now), true, nil
	case "pods":
		pod, err := r.Pod(ctx, namespace, name)
		if err != nil || pod == nil {
			return "", false, err
		}
		ev, err := events("", namespace, name, pod.UID)
		if err != nil {
			return "", false, err
		}
		return Pod(pod, ev, now), true, nil
	case "nodes":
		node, err := r.Node(ctx, name)
		if err != nil || node == nil {
			return "", false, err
		}
		pods, err := r.PodsOnNode(ctx, name)
		if err != nil {
			return "", false, err
		}
		lease, leaseErr := r.Lease(ctx, name)
		// Events about a node name it by its UID (controllers) or by its
		// name (the kubelet); kubectl shows both.
		ev, err := events("Node", "", name, node.UID, types.UID(name))
		if err != nil {
			return "", false, err
		}
		return Node(node, pods, lease, leaseErr, ev, now), true, nil
	}
	return "", false, fmt.Errorf("unknown resource %q", resource)
}
