package podroutes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/model"
)

// Defaults of Config.
const (
	DefaultResyncPeriod = time.Minute
	DefaultRetryBase    = time.Second
	DefaultMaxRetries   = 5
	maxBackoff          = 30 * time.Second
)

// Config configures a Reconciler.
type Config struct {
	// NodeName is this node: its own pod CIDRs get no route. Required.
	NodeName string
	// Kernel is the routing table to program. Required.
	Kernel Kernel
	// Logger gets one line per route change and per new reason to skip a
	// node; the zero value means klog.Background().
	Logger klog.Logger
	// ResyncPeriod is how often Run reconciles without a change in the model
	// (routes deleted behind its back, next hops that became reachable).
	ResyncPeriod time.Duration
	// RetryBase is the first wait after a failed sync; each retry doubles it
	// (at most 30s). MaxRetries bounds the retries after one change; then Run
	// waits for the next change or resync.
	RetryBase  time.Duration
	MaxRetries int
}

// Reconciler keeps the routes to other nodes' pod CIDRs in step with the Nodes
// of the model. New starts nothing; Run does the work.
type Reconciler struct {
	cfg      Config
	log      klog.Logger
	reported map[string]bool // skip reasons already logged, by message
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Reconciler, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("pod routes: no node name")
	}
	if cfg.Kernel == nil {
		return nil, errors.New("pod routes: no kernel")
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = DefaultResyncPeriod
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	log := cfg.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	return &Reconciler{cfg: cfg, log: log, reported: map[string]bool{}}, nil
}

// Sync makes the kernel hold exactly the usable desired routes for nodes:
// deletes first, then replacements, then additions. A route that cannot be
// made is reported and does not stop the others; the returned error joins the
// kernel errors (a skipped node is not one).
func (r *Reconciler) Sync(ctx context.Context, nodes []*model.Node) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	local, err := r.cfg.Kernel.LocalAddrs()
	if err != nil {
		return fmt.Errorf("pod routes: %w", err)
	}
	want, skips := Desired(nodes, r.cfg.NodeName)
	want, unusable := Usable(want, local)
	skips = append(skips, unusable...)
	have, err := r.cfg.Kernel.List()
	if err != nil {
		return fmt.Errorf("pod routes: %w", err)
	}
	plan := Diff(want, have)
	var errs []error
	for _, rt := range plan.Delete {
		if err := r.cfg.Kernel.Delete(rt); err != nil {
			errs = append(errs, err)
			continue
		}
		r.log.Info("pod route deleted", "dst", rt.Dst, "via", rt.Via)
	}
	for _, rt := range plan.Replace {
		if err := r.cfg.Kernel.Replace(rt); err != nil {
			errs = append(errs, err)
			continue
		}
		r.log.Info("pod route replaced", "node", rt.Node, "dst", rt.Dst, "via", rt.Via)
	}
	for _, rt := range plan.Add {
		err := r.cfg.Kernel.Add(rt)
		switch {
		case errors.Is(err, ErrExists):
			skips = append(skips, &SkipError{Node: rt.Node, Dst: rt.Dst, Err: ErrExists})
		case err != nil:
			errs = append(errs, err)
		default:
			r.log.Info("pod route added", "node", rt.Node, "dst", rt.Dst, "via", rt.Via)
		}
	}
	r.report(skips)
	if len(errs) > 0 {
		return fmt.Errorf("pod routes: %w", errors.Join(errs...))
	}
	return nil
}

// report logs each skip reason once while it lasts: one that goes away and
// comes back is logged again.
func (r *Reconciler) report(skips []error) {
	now := make(map[string]bool, len(skips))
	for _, e := range skips {
		msg := e.Error()
		now[msg] = true
		if r.reported[msg] {
			continue
		}
		var se *SkipError
		if errors.As(e, &se) {
			kv := []any{"node", se.Node, "reason", se.Err.Error()}
			if se.Dst.IsValid() {
				kv = append(kv, "podCIDR", se.Dst)
			}
			r.log.Info("pod route skipped", kv...)
			continue
		}
		r.log.Info("pod route skipped", "reason", msg)
	}
	r.reported = now
}

// Run reconciles on every change of store's snapshot (once the source is
// synced: an unsynced model would delete every route), every ResyncPeriod,
// and after a failure with exponential backoff, at most MaxRetries times per
// change. It returns nil when ctx ends and leaves the routes in place: a
// restart adopts them. Errors are logged, never returned.
func (r *Reconciler) Run(ctx context.Context, store *model.Store) error {
	sub := store.Subscribe()
	defer sub.Close()
	resync := time.NewTicker(r.cfg.ResyncPeriod)
	defer resync.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var snap *model.Snapshot
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.C():
			snap, _ = sub.Next()
			failures = 0
		case <-resync.C:
		case <-retry.C:
		}
		if snap == nil || !snap.Synced {
			continue
		}
		err := r.Sync(ctx, snap.Nodes())
		switch {
		case err == nil:
			failures = 0
			retry.Stop()
		case ctx.Err() != nil:
			return nil
		case failures >= r.cfg.MaxRetries:
			r.log.Error(err, "pod routes sync failed; waiting for the next change or resync", "retries", failures)
		default:
			failures++
			wait := backoff(r.cfg.RetryBase, failures)
			r.log.Error(err, "pod routes sync failed; retrying", "in", wait, "retry", failures)
			retry.Reset(wait)
		}
	}
}

// backoff is base doubled for every failure after the first, at most maxBackoff.
func backoff(base time.Duration, failures int) time.Duration {
	d := base
	for range min(failures-1, 16) {
		d *= 2
	}
	return min(d, maxBackoff)
}

// Cleanup deletes every route of svcnet's protocol (svcnet proxy --cleanup)
// and returns how many went. It does not stop at a failed one.
func Cleanup(ctx context.Context, k Kernel) (int, error) {
	have, err := k.List()
	if err != nil {
		return 0, fmt.Errorf("pod routes cleanup: %w", err)
	}
	n := 0
	var errs []error
	for _, rt := range have {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := k.Delete(rt); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("pod routes cleanup: %w", errors.Join(errs...))
	}
	return n, nil
}
