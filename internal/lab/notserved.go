package lab

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lb/plan"
)

// settleBound is how long NotServed waits for a kube control plane's
// controllers (EndpointSlices, svcnet lb) to act on what was applied.
const settleBound = 5 * time.Second

// NotServed returns a warning line for each Service among objs that the
// control plane accepted but that is not served: a LoadBalancer Service
// without an address (and svcnet lb's reason), a Service without a ready
// endpoint. On the kube control plane, whose controllers act after the
// apply, it waits up to settleBound for the warnings to clear.
func (l *Lab) NotServed(ctx context.Context, objs []controlplane.Object) ([]string, error) {
	_, async := l.c.CP.(*cluster.Kube)
	deadline := time.Now().Add(settleBound)
	for {
		r, err := l.Get(ctx)
		if err != nil {
			return nil, err
		}
		w := notServed(r, objs)
		if len(w) == 0 || !async || time.Now().After(deadline) {
			return w, nil
		}
		select {
		case <-ctx.Done():
			return w, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// notServed is NotServed's decision on what r holds.
func notServed(r *controlplane.Result, objs []controlplane.Object) []string {
	var out []string
	for _, o := range objs {
		given, ok := o.Obj.(*corev1.Service)
		if !ok {
			continue
		}
		ns := given.Namespace
		if ns == "" {
			ns = corev1.NamespaceDefault
		}
		var s *corev1.Service
		for _, x := range r.Services {
			if x.Namespace == ns && x.Name == given.Name {
				s = x
			}
		}
		if s == nil || s.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		id := fmt.Sprintf("Service %s/%s", s.Namespace, s.Name)
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) == 0 {
			out = append(out, fmt.Sprintf("%s: LoadBalancer address <pending>: %s", id, pendingReason(r.Events, s)))
		}
		if !hasReadyEndpoint(r.EndpointSlices, s) {
			why := "no EndpointSlice gives it a ready endpoint"
			if len(s.Spec.Selector) > 0 {
				why = "no ready Pod matches its selector " + labels.FormatLabels(s.Spec.Selector)
			}
			out = append(out, fmt.Sprintf("%s: no endpoints: %s", id, why))
		}
	}
	return out
}

// pendingReason is the message of svcnet lb's last AllocationFailed event
// about s, when that is its last event.
func pendingReason(events []corev1.Event, s *corev1.Service) string {
	var last *corev1.Event
	for i, e := range events {
		o := e.InvolvedObject
		if o.Kind == "Service" && o.Namespace == s.Namespace && o.Name == s.Name && (o.UID == "" || o.UID == s.UID) &&
			(last == nil || !e.LastTimestamp.Before(&last.LastTimestamp)) {
			last = &events[i]
		}
	}
	if last != nil && last.Reason == plan.ReasonAllocationFailed {
		return last.Message
	}
	return "no address allocated yet"
}

func hasReadyEndpoint(slices []*discoveryv1.EndpointSlice, s *corev1.Service) bool {
	for _, sl := range slices {
		if sl.Namespace != s.Namespace || sl.Labels[discoveryv1.LabelServiceName] != s.Name {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				return true
			}
		}
	}
	return false
}
