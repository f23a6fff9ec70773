//lint:file-ignore SA1019 legacy v1 Endpoints are applied as given, as kubectl applies them

package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/describe"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// ControlPlane is the lab's control plane as the lab itself uses it: the part of the API
// a kubectl user and a kubelet use. Two implementations: fileCluster (the embedded
// control plane over manifests, default) and kubeCluster (real kube-apiserver and
// kube-controller-manager).
type ControlPlane interface {
	// RegisterNodes records the lab's nodes, as kubelets register theirs.
	RegisterNodes(ctx context.Context, nodes []*corev1.Node) error
	// Apply creates or updates objects other than Pods and Nodes (Services,
	// Namespaces, EndpointSlices, Endpoints, IPAddressPools), as `kubectl
	// apply` does. An object the control plane refuses is rejected with an
	// error naming its origin and changes nothing; the others are applied.
	Apply(ctx context.Context, objs []controlplane.Object) []error
	// Delete removes an object of a kind Apply takes.
	Delete(ctx context.Context, kind, namespace, name string) error
	// Pod returns the Pod, or nil when there is none.
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// CreatePod records a scheduled Pod (spec.nodeName set) without status.
	CreatePod(ctx context.Context, pod *corev1.Pod) error
	// SetPodStatus writes the Pod's status, as the kubelet does.
	SetPodStatus(ctx context.Context, pod *corev1.Pod) error
	// TerminatePod marks the Pod terminating (deletionTimestamp), as a graceful
	// delete does; RemovePod removes it for good, as the kubelet's final delete does.
	TerminatePod(ctx context.Context, namespace, name string, graceSeconds int64) error
	RemovePod(ctx context.Context, namespace, name string) error
	// Result lists what the control plane holds, for `lab get`: of kinds
	// (Service, Pod, Node; none: every kind) and what they depend on, or
	// more.
	Result(ctx context.Context, kinds ...string) (*controlplane.Result, error)
	// ProxyArgs are the state flags of every node's svcnet proxy.
	ProxyArgs() []string
	// Reader reads what the control plane holds, events included, for
	// describe.
	Reader(ctx context.Context) (describe.Reader, error)
}

// KindOf names an object's kind for messages and file names.
func KindOf(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.Service:
		return "Service"
	case *corev1.Pod:
		return "Pod"
	case *corev1.Node:
		return "Node"
	case *corev1.Namespace:
		return "Namespace"
	case *corev1.Endpoints:
		return "Endpoints"
	case *discoveryv1.EndpointSlice:
		return "EndpointSlice"
	case *pool.IPAddressPool:
		return pool.Kind
	}
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", obj)
}

// Kinds `lab delete` takes, by the names kubectl accepts.
var deleteKinds = map[string]string{
	"pod": "Pod", "pods": "Pod", "po": "Pod",
	"ipaddresspool": "IPAddressPool", "ipaddresspools": "IPAddressPool", "svcpool": "IPAddressPool",
	"service": "Service", "services": "Service", "svc": "Service",
	"endpointslice": "EndpointSlice", "endpointslices": "EndpointSlice",
	"endpoints": "Endpoints", "ep": "Endpoints",
	"namespace": "Namespace", "namespaces": "Namespace", "ns": "Namespace",
}

// CanonicalKind maps a kubectl resource name to its kind.
func CanonicalKind(resource string) (string, error) {
	if k, ok := deleteKinds[strings.ToLower(resource)]; ok {
		return k, nil
	}
	return "", fmt.Errorf("unknown resource type %q (want pod, service, endpointslice, endpoints or namespace)", resource)
}

// ApplyOrder is the order objects are applied in, as kubectl's: namespaces before
// what lives in them, Services before the Pods that back them.
func ApplyOrder(o runtime.Object) int {
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

// ErrNotFound marks lookups of objects that do not exist.
var ErrNotFound = errors.New("not found")
