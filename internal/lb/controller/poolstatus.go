package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// acceptedReason is the ConditionAccepted reason of a pool's fate.
func acceptedReason(r plan.PoolResult) string {
	switch {
	case r.Err == nil && r.Conflict != nil:
		return pool.ReasonReservedAddresses
	case r.Err == nil:
		return pool.ReasonAccepted
	case errors.Is(r.Err, pool.ErrOverlap):
		return pool.ReasonOverlap
	case errors.Is(r.Err, pool.ErrReserved):
		return pool.ReasonReservedAddresses
	}
	return pool.ReasonInvalid
}

// acceptedCondition is the ConditionAccepted a pool of generation gen should
// have (LastTransitionTime unset: meta.SetStatusCondition fills it).
func acceptedCondition(r plan.PoolResult, gen int64) metav1.Condition {
	c := metav1.Condition{Type: pool.ConditionAccepted, Status: metav1.ConditionTrue, ObservedGeneration: gen,
		Reason: acceptedReason(r), Message: "the pool serves LoadBalancer Services"}
	switch {
	case r.Err != nil:
		c.Status, c.Message = metav1.ConditionFalse, reasonText(r.Err)
	case r.Conflict != nil:
		c.Message = reasonText(r.Conflict)
	}
	return c
}

// reasonText is a pool error's text without the pool's name.
func reasonText(err error) string {
	var pe *pool.Error
	if errors.As(err, &pe) {
		return pe.Reason()
	}
	return err.Error()
}

// sameCondition reports whether a and b say the same, times aside.
func sameCondition(a, b *metav1.Condition) bool {
	return a != nil && b != nil && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration
}

// poolWrite is a pool status this controller wrote over the cached
// resourceVersion staleRV.
type poolWrite struct {
	staleRV string
	status  *pool.IPAddressPoolStatus
}

// poolOverlay returns p, or a copy with the status this controller wrote when
// the cache does not show that write yet, so that a pool just admitted is
// established for the next recompute. It forgets writes the cache shows.
func (st *syncState) poolOverlay(p *pool.IPAddressPool) *pool.IPAddressPool {
	w, ok := st.poolWritten[p.Name]
	if !ok {
		return p
	}
	if p.ResourceVersion != w.staleRV {
		delete(st.poolWritten, p.Name)
		return p
	}
	cp := p.DeepCopy()
	cp.Status = w.status.DeepCopy()
	return cp
}

// syncPools makes every pool's ConditionAccepted say what the plan made of it,
// and reports each change (an Event on the pool, a log line) once. A write
// that fails is logged and retried at the next recompute; it holds up
// nothing.
func (c *Controller) syncPools(ctx context.Context, inf *informerSet, in plan.Input, out plan.Output) {
	st := c.state
	byName := map[string]*pool.IPAddressPool{}
	for _, p := range in.Pools {
		byName[p.Name] = p
	}
	seen := map[string]bool{}
	for _, r := range out.Pools {
		p := byName[r.Name]
		if p == nil {
			continue
		}
		seen[r.Name] = true
		want := acceptedCondition(r, p.Generation)
		var have *metav1.Condition
		if p.Status != nil {
			have = meta.FindStatusCondition(p.Status.Conditions, pool.ConditionAccepted)
		}
		u, ok := inf.pool(r.Name)
		if !ok {
			continue
		}
		if last := st.poolReported[r.Name]; !sameCondition(&last, &want) && !sameCondition(have, &want) {
			st.ev.pool(u, want)
		}
		st.poolReported[r.Name] = want
		if sameCondition(have, &want) {
			continue
		}
		status := &pool.IPAddressPoolStatus{}
		if p.Status != nil {
			status = p.Status.DeepCopy()
		}
		meta.SetStatusCondition(&status.Conditions, want)
		written, err := c.writePoolStatus(ctx, u, status)
		if err != nil {
			c.log.Error(err, "Writing IPAddressPool status failed", "pool", r.Name)
		}
		if written {
			st.poolWritten[r.Name] = poolWrite{staleRV: u.GetResourceVersion(), status: status}
		}
	}
	for name := range st.poolReported {
		if !seen[name] {
			delete(st.poolReported, name)
		}
	}
	for name := range st.poolWritten {
		if !seen[name] {
			delete(st.poolWritten, name)
		}
	}
}

// writePoolStatus writes status to the pool cached as u (UpdateStatus at its
// resourceVersion) and reports whether it did. A conflict or a pool gone is not
// an error: the change that caused it triggers a recompute.
func (c *Controller) writePoolStatus(ctx context.Context, u *unstructured.Unstructured, status *pool.IPAddressPoolStatus) (bool, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return false, fmt.Errorf("IPAddressPool %s status: %w", u.GetName(), err)
	}
	obj := u.DeepCopy()
	obj.Object["status"] = m
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err = c.dyn.Resource(poolGVR).UpdateStatus(cctx, obj, metav1.UpdateOptions{FieldManager: c.cfg.FieldManager})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		c.log.V(2).Info("IPAddressPool changed before its status was written", "pool", u.GetName())
		return false, nil
	case err != nil:
		return false, fmt.Errorf("update status of IPAddressPool %s: %w", u.GetName(), err)
	}
	return true, nil
}
