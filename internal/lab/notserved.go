package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/proxy"
)

// settleBound is how long NotServed waits for a kube control plane's
// controllers (EndpointSlices, svcnet lb) to act on what was applied.
const settleBound = 5 * time.Second

// NotServed returns a warning line for each Service among objs that the
// control plane accepted but that is not served: a LoadBalancer Service
// without an address (and svcnet lb's reason), a Service without a ready
// endpoint, a Service (or port) a node's svcnet proxy reported it does not
// serve (its ServiceSkipped events). On the kube control plane, whose
// controllers act after the apply, it waits up to settleBound while a
// warning may yet clear (no endpoint yet, no address and no reason yet).
// A file-mode lab's proxies load what was applied after the apply
// returns: their reports show in the Services' events (lab describe,
// lab get events), and here only when already made.
func (l *Lab) NotServed(ctx context.Context, objs []controlplane.Object) ([]string, error) {
	if f, ok := l.c.CP.(*cluster.File); ok {
		if w, handled, err := f.NotServed(ctx, objs); handled {
			return w, err
		}
	}
	_, async := l.c.CP.(*cluster.Kube)
	deadline := time.Now().Add(settleBound)
	for {
		r, err := l.Get(ctx)
		if err != nil {
			return nil, err
		}
		w, final := notServed(r, objs)
		if final || !async || time.Now().After(deadline) {
			return w, nil
		}
		select {
		case <-ctx.Done():
			return w, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// notServed is NotServed's decision on what r holds; final is false when
// a warning may clear as controllers act.
func notServed(r *controlplane.Result, objs []controlplane.Object) (out []string, final bool) {
	final = true
	services := make(map[string]*corev1.Service, len(r.Services))
	for _, s := range r.Services {
		services[serviceKey(s.Namespace, s.Name)] = s
	}
	ready := readyServices(r.EndpointSlices)
	events := eventsByService(r.Events)
	for _, o := range objs {
		given, ok := o.Obj.(*corev1.Service)
		if !ok {
			continue
		}
		ns := given.Namespace
		if ns == "" {
			ns = corev1.NamespaceDefault
		}
		key := serviceKey(ns, given.Name)
		s := services[key]
		if s == nil || s.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		id := "Service " + key
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) == 0 {
			why, decided := pendingReason(events[key], s)
			final = final && decided
			out = append(out, fmt.Sprintf("%s: LoadBalancer address <pending>: %s", id, why))
		}
		if !ready[key] {
			why := "no EndpointSlice gives it a ready endpoint"
			if len(s.Spec.Selector) > 0 {
				why = "no ready Pod matches its selector " + labels.FormatLabels(s.Spec.Selector)
			}
			final = false
			out = append(out, fmt.Sprintf("%s: no endpoints: %s", id, why))
		}
		for _, msg := range skipped(events[key], s) {
			out = append(out, fmt.Sprintf("%s: not served by svcnet proxy: %s", id, msg))
		}
	}
	return out, final
}

// serviceKey is "NAMESPACE/NAME".
func serviceKey(namespace, name string) string { return namespace + "/" + name }

// eventsByService returns the events about Services, by serviceKey.
func eventsByService(events []corev1.Event) map[string][]corev1.Event {
	out := map[string][]corev1.Event{}
	for _, e := range events {
		if o := e.InvolvedObject; o.Kind == "Service" {
			key := serviceKey(o.Namespace, o.Name)
			out[key] = append(out[key], e)
		}
	}
	return out
}

// skipped are the messages of the nodes' proxies' ServiceSkipped events
// about s, sorted.
func skipped(events []corev1.Event, s *corev1.Service) []string {
	var out []string
	for _, e := range events {
		if e.Reason == proxy.ReasonServiceSkipped && about(e, s) {
			out = append(out, e.Message)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// about reports whether e is about s (by kind, namespace, name and, when
// e names one, uid).
func about(e corev1.Event, s *corev1.Service) bool {
	o := e.InvolvedObject
	return o.Kind == "Service" && o.Namespace == s.Namespace && o.Name == s.Name && (o.UID == "" || o.UID == s.UID)
}

// pendingReason is the message of svcnet lb's last event about s when it
// is AllocationFailed (decided), else says none was allocated yet.
func pendingReason(events []corev1.Event, s *corev1.Service) (why string, decided bool) {
	var last *corev1.Event
	for i, e := range events {
		if e.Source.Component == controlplane.EventSource && about(e, s) &&
			(last == nil || !e.LastTimestamp.Before(&last.LastTimestamp)) {
			last = &events[i]
		}
	}
	if last != nil && last.Reason == plan.ReasonAllocationFailed {
		return last.Message, true
	}
	return "no address allocated yet", false
}

// readyServices returns the serviceKeys of the Services an EndpointSlice
// gives a ready endpoint.
func readyServices(list []*discoveryv1.EndpointSlice) map[string]bool {
	out := map[string]bool{}
	for _, sl := range list {
		name, ok := sl.Labels[discoveryv1.LabelServiceName]
		if !ok {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				out[serviceKey(sl.Namespace, name)] = true
				break
			}
		}
	}
	return out
}
