package controlplane

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// EventSource is the component the embedded control plane's events name:
// svcnet lb controller's, whose decisions it makes in a file-mode cluster.
const EventSource = "svcnet-lb-controller"

// newEvent is an event about obj (of kind and apiVersion) at now, named as
// client-go names events (the object's name and the time in hex
// nanoseconds), in the object's namespace or, for a cluster-scoped one,
// in default.
func newEvent(obj metav1.Object, gvk schema.GroupVersionKind, typ, reason, msg string, now time.Time) corev1.Event {
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	t := metav1.NewTime(now)
	return corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: eventName(obj.GetName(), now), Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(),
			Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()},
		Reason: reason, Message: msg, Type: typ,
		Source:         corev1.EventSource{Component: EventSource},
		FirstTimestamp: t, LastTimestamp: t, Count: 1,
	}
}

// eventName is the name client-go gives an event about the object named
// name at now.
func eventName(name string, now time.Time) string { return fmt.Sprintf("%s.%x", name, now.UnixNano()) }

// serviceEvent is svcnet lb's event for a LoadBalancer Service's outcome:
// IPAllocated with its addresses and pool, or AllocationFailed with why.
func serviceEvent(s *corev1.Service, r plan.ServiceResult, now time.Time) (corev1.Event, bool) {
	gvk := corev1.SchemeGroupVersion.WithKind("Service")
	if r.Err != nil {
		return newEvent(s, gvk, corev1.EventTypeWarning, plan.ReasonAllocationFailed, r.Err.Error(), now), true
	}
	var ips []string
	for _, in := range r.Ingress {
		ips = append(ips, in.IP)
	}
	if len(ips) == 0 {
		return corev1.Event{}, false
	}
	return newEvent(s, gvk, corev1.EventTypeNormal, plan.ReasonIPAllocated, plan.AllocatedMessage(ips, r.Pool), now), true
}

// poolEvent is svcnet lb's event for an admitted pool: PoolAccepted, or
// ReservedAddresses when it holds addresses it no longer hands out.
func poolEvent(p *pool.IPAddressPool, r plan.PoolResult, now time.Time) corev1.Event {
	gvk := pool.SchemeGroupVersion.WithKind(pool.Kind)
	if r.Conflict != nil {
		return newEvent(p, gvk, corev1.EventTypeWarning, plan.ReasonPoolReservedAddresses, poolReason(r.Conflict).Error(), now)
	}
	return newEvent(p, gvk, corev1.EventTypeNormal, plan.ReasonPoolAccepted, "the pool serves LoadBalancer Services", now)
}
