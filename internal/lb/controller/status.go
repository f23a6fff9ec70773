package controller

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lb/plan"
)

// writeOutcome is how a status write ended.
type writeOutcome int

const (
	// writeDone: the status was written.
	writeDone writeOutcome = iota
	// writeAlreadyDone: the Service as re-read already had the status.
	writeAlreadyDone
	// writeSuperseded: the Service is gone or changed in what the plan was
	// computed from; nothing was written.
	writeSuperseded
	// writeFailed: the write failed; retry later.
	writeFailed
)

// maxConflictRetries bounds the re-read-and-retry rounds after conflicts.
const maxConflictRetries = 4

// writeStatus sets planned's status.loadBalancer.ingress to want with
// UpdateStatus. On a conflict it re-reads the Service: when the fresh one
// already has want it is done; when the fresh one differs from planned in what
// the plan reads (spec, labels, annotations, current ingress) it gives up as
// superseded; otherwise it retries on the fresh one, at most
// maxConflictRetries times. It returns the resourceVersions the cache may
// still show without the write (planned's and every one re-read).
func (c *Controller) writeStatus(ctx context.Context, planned *corev1.Service, want []corev1.LoadBalancerIngress) (writeOutcome, []string, error) {
	services := c.client.CoreV1().Services(planned.Namespace)
	stale := []string{planned.ResourceVersion}
	obj := planned.DeepCopy()
	for attempt := 0; ; attempt++ {
		obj.Status.LoadBalancer.Ingress = want
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := services.UpdateStatus(cctx, obj, metav1.UpdateOptions{FieldManager: c.cfg.FieldManager})
		cancel()
		switch {
		case err == nil:
			return writeDone, stale, nil
		case apierrors.IsNotFound(err):
			return writeSuperseded, stale, nil
		case !apierrors.IsConflict(err) || attempt >= maxConflictRetries:
			return writeFailed, stale, fmt.Errorf("update status of service %s/%s: %w", planned.Namespace, planned.Name, err)
		}
		cctx, cancel = context.WithTimeout(ctx, callTimeout)
		fresh, err := services.Get(cctx, planned.Name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return writeSuperseded, stale, nil
		case err != nil:
			return writeFailed, stale, fmt.Errorf("re-read service %s/%s after a conflict: %w", planned.Namespace, planned.Name, err)
		}
		stale = append(stale, fresh.ResourceVersion)
		if plan.EqualIngress(fresh.Status.LoadBalancer.Ingress, want) {
			return writeAlreadyDone, stale, nil
		}
		if !samePlanInputs(planned, fresh) {
			return writeSuperseded, stale, nil
		}
		obj = fresh.DeepCopy()
	}
}

// samePlanInputs reports whether a and b agree in everything of a Service the
// plan reads: identity, spec, labels, annotations and current ingress.
func samePlanInputs(a, b *corev1.Service) bool {
	return a.UID == b.UID &&
		equality.Semantic.DeepEqual(a.Spec, b.Spec) &&
		maps.Equal(a.Labels, b.Labels) &&
		maps.Equal(a.Annotations, b.Annotations) &&
		plan.EqualIngress(a.Status.LoadBalancer.Ingress, b.Status.LoadBalancer.Ingress)
}
