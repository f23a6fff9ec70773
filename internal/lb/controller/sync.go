package controller

import (
	"context"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/model"
)

// syncState is what the sync loop remembers between recomputes. Only the loop
// goroutine uses it.
type syncState struct {
	ev      *eventer
	backoff *backoff
	// failMsg is, per pending Service, the reason last reported in an Event.
	failMsg map[model.ServiceKey]string
	// written is, per Service, a status this controller wrote that the cache
	// may not show yet.
	written map[model.ServiceKey]pendingWrite
	// poolErrs are the pool conversion errors last logged, sorted.
	poolErrs []string
	// poolReported is, per pool, the ConditionAccepted last reported (Event).
	poolReported map[string]metav1.Condition
	// poolWritten is, per pool, a status this controller wrote that the cache
	// may not show yet.
	poolWritten map[string]poolWrite
}

// pendingWrite is a status written to a Service whose cached version was one
// of staleRVs: while the cache still holds one of them, ingress stands in for
// the cached status.
type pendingWrite struct {
	staleRVs []string
	ingress  []corev1.LoadBalancerIngress
}

func newSyncState(ev *eventer) *syncState {
	return &syncState{
		ev:           ev,
		backoff:      newBackoff(),
		failMsg:      map[model.ServiceKey]string{},
		written:      map[model.ServiceKey]pendingWrite{},
		poolReported: map[string]metav1.Condition{},
		poolWritten:  map[string]poolWrite{},
	}
}

func keyOf(svc *corev1.Service) model.ServiceKey {
	return model.ServiceKey{Namespace: svc.Namespace, Name: svc.Name}
}

// overlay returns svc, or a copy with the status this controller wrote when
// the cache does not show that write yet. It forgets writes the cache shows
// (any other resourceVersion) and, through seen, lets the caller forget those
// of deleted Services.
func (st *syncState) overlay(seen map[model.ServiceKey]bool) func(*corev1.Service) *corev1.Service {
	return func(svc *corev1.Service) *corev1.Service {
		key := keyOf(svc)
		seen[key] = true
		w, ok := st.written[key]
		if !ok {
			return svc
		}
		if !slices.Contains(w.staleRVs, svc.ResourceVersion) {
			delete(st.written, key)
			return svc
		}
		cp := svc.DeepCopy()
		cp.Status.LoadBalancer.Ingress = w.ingress
		return cp
	}
}

// sync recomputes the plan from the caches and writes every Service status
// that differs, at now. full resets every write backoff. It returns when the
// earliest backed-off write is due (zero if none).
func (c *Controller) sync(ctx context.Context, inf *informerSet, full bool, now time.Time) time.Time {
	st := c.state
	if full {
		st.backoff.reset()
	}
	for key := range c.takeDirty() {
		st.backoff.forget(key)
	}
	seen := map[model.ServiceKey]bool{}
	in, poolErrs, err := inf.input(st.overlay(seen), st.poolOverlay)
	if err != nil {
		c.log.Error(err, "Reading the caches failed")
		return now.Add(backoffBase)
	}
	for key := range st.written {
		if !seen[key] {
			delete(st.written, key)
		}
	}
	out := plan.Desired(c.cfg.Plan, in)
	c.reportPoolErrors(poolErrs)
	// Pool statuses first: a pool whose Services get addresses is then
	// recorded as admitted, so that a restart keeps it established.
	c.syncPools(ctx, inf, in, out)

	byKey := make(map[model.ServiceKey]*corev1.Service, len(in.Services))
	for _, svc := range in.Services {
		byKey[keyOf(svc)] = svc
	}
	results := make(map[model.ServiceKey]bool, len(out.Results))
	var retryAt time.Time
	for _, r := range out.Results {
		results[r.Key] = true
		svc := byKey[r.Key]
		if svc == nil {
			continue
		}
		c.reportPending(svc, r)
		if plan.EqualIngress(svc.Status.LoadBalancer.Ingress, r.Ingress) {
			st.backoff.forget(r.Key)
			continue
		}
		if ok, at := st.backoff.due(r.Key, now); !ok {
			retryAt = earliest(retryAt, at)
			continue
		}
		retryAt = earliest(retryAt, c.apply(ctx, svc, r, now))
	}
	for key := range st.failMsg {
		if !results[key] {
			delete(st.failMsg, key)
		}
	}
	for key := range st.backoff.entries {
		if !results[key] {
			st.backoff.forget(key)
		}
	}
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.observe(out)
	}
	return retryAt
}

// apply writes r's ingress to svc (as planned) and reports the outcome. It
// returns when to retry a failed write (zero when not).
func (c *Controller) apply(ctx context.Context, svc *corev1.Service, r plan.ServiceResult, now time.Time) time.Time {
	st := c.state
	outcome, staleRVs, err := c.writeStatus(ctx, svc, r.Ingress)
	switch outcome {
	case writeFailed:
		at := st.backoff.failed(r.Key, now)
		c.log.Error(err, "Writing Service status failed", "service", r.Key.String(),
			"ips", ingressIPs(r.Ingress), "failures", st.backoff.failures(r.Key), "retryAt", at)
		return at
	case writeSuperseded:
		// The Service changed since the plan: the change's recompute decides.
		c.log.V(2).Info("Service changed before its status was written", "service", r.Key.String())
	case writeDone, writeAlreadyDone:
		st.backoff.forget(r.Key)
		st.written[r.Key] = pendingWrite{staleRVs: staleRVs, ingress: r.Ingress}
		if outcome == writeAlreadyDone {
			return time.Time{}
		}
		if old := svc.Status.LoadBalancer.Ingress; len(r.Ingress) > 0 {
			st.ev.allocated(svc, r.Ingress, r.Pool)
		} else if len(old) > 0 {
			st.ev.released(svc, old)
		}
	}
	return time.Time{}
}

// reportPending emits AllocationFailed once per distinct reason while r has
// one, and forgets the reason when it has none.
func (c *Controller) reportPending(svc *corev1.Service, r plan.ServiceResult) {
	st := c.state
	if r.Err == nil {
		delete(st.failMsg, r.Key)
		return
	}
	msg := r.Err.Error()
	if st.failMsg[r.Key] == msg {
		return
	}
	st.failMsg[r.Key] = msg
	st.ev.failed(svc, r.Err)
}

// reportPoolErrors logs every pool that does not convert (its object is not
// an IPAddressPool) when the set of them changed since the last call; the
// pools the plan refuses are reported by syncPools.
func (c *Controller) reportPoolErrors(errs []error) {
	msgs := make([]string, 0, len(errs))
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	sort.Strings(msgs)
	msgs = slices.Compact(msgs)
	if slices.Equal(msgs, c.state.poolErrs) {
		return
	}
	if len(msgs) == 0 {
		c.log.Info("Every IPAddressPool converts again")
	}
	for _, m := range msgs {
		c.log.Error(nil, "IPAddressPool ignored", "reason", m)
	}
	c.state.poolErrs = msgs
}

// earliest returns the earlier non-zero time of a and b.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
