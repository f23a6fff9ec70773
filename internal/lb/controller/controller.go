package controller

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/model"
)

// Component names the controller in Events (source component) and, by
// default, in managedFields (field manager).
const Component = "svcnet-lb-controller"

// Defaults for Config.
const (
	DefaultResync = 5 * time.Minute
	// coalesce is how long changes are collected before one recompute.
	coalesce = 50 * time.Millisecond
	// callTimeout bounds each API call the controller makes itself.
	callTimeout = 15 * time.Second
)

// Config configures a Controller.
type Config struct {
	// Plan selects the Services the controller owns (loadBalancerClass).
	// An empty Class means plan.DefaultClass.
	Plan plan.Config
	// Logger is used for every log; the zero value means klog.FromContext of
	// Run's context.
	Logger klog.Logger
	// Resync is the period of full recomputes even without changes (which also
	// retry writes that gave up); default DefaultResync.
	Resync time.Duration
	// FieldManager names the controller's status writes in managedFields;
	// default Component.
	FieldManager string
	// Metrics, when set, is updated with pool usage after every recompute.
	Metrics *Metrics
	// ServiceCIDRs are the cluster's Service networks (kube-apiserver's
	// --service-cluster-ip-range), which no pool may hold. When the apiserver
	// serves ServiceCIDR objects (networking.k8s.io/v1, Kubernetes 1.33 and
	// later) their CIDRs are added, so this may stay empty there.
	ServiceCIDRs []netip.Prefix
}

// Controller writes LoadBalancer Services' status from the plan. Use New,
// then Run once.
type Controller struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
	cfg    Config
	log    klog.Logger

	// mu guards dirty; informer handlers add to it, the sync loop takes it.
	mu    sync.Mutex
	dirty map[model.ServiceKey]struct{}
	// signal (capacity 1) wakes the sync loop after a change.
	signal chan struct{}

	// Owned by the sync loop.
	state *syncState
}

// New returns a Controller for the API server behind client (typed) and dyn
// (for IPAddressPools). It validates cfg and starts nothing.
func New(client kubernetes.Interface, dyn dynamic.Interface, cfg Config) (*Controller, error) {
	if client == nil || dyn == nil {
		return nil, fmt.Errorf("lb controller: a typed and a dynamic client are both required")
	}
	if cfg.Plan.Class == "" {
		cfg.Plan.Class = plan.DefaultClass
	}
	if errs := validation.IsQualifiedName(cfg.Plan.Class); len(errs) > 0 {
		return nil, fmt.Errorf("lb controller: loadBalancerClass %q: %v", cfg.Plan.Class, errs)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.FieldManager == "" {
		cfg.FieldManager = Component
	}
	return &Controller{
		client: client,
		dyn:    dyn,
		cfg:    cfg,
		log:    cfg.Logger,
		dirty:  map[model.ServiceKey]struct{}{},
		signal: make(chan struct{}, 1),
	}, nil
}

// Run starts the informers, waits until every cache has synced, then
// recomputes and writes after every change (coalesced), and at least every
// Resync, until ctx ends. It returns nil after ctx ends (also while still
// waiting for the caches), or an error if the informers cannot be set up. Every
// goroutine it started has stopped when it returns. Call Run once.
func (c *Controller) Run(ctx context.Context) error {
	if c.log.GetSink() == nil {
		c.log = klog.FromContext(ctx)
	}
	c.log = c.log.WithName("lb-controller")
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	withCIDRs, err := c.discoverServiceCIDRs(runCtx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	inf, err := c.startInformers(runCtx, withCIDRs)
	if err != nil {
		return err
	}
	defer inf.shutdown()

	ev := newEventer(runCtx, c.client, c.log)
	defer ev.shutdown()
	c.state = newSyncState(ev)

	start := time.Now()
	if !inf.waitForSync(runCtx, c.log) {
		c.log.Info("Stopped before the caches synced", "elapsed", time.Since(start).Round(time.Millisecond))
		return nil
	}
	c.log.Info("Caches synced", "elapsed", time.Since(start).Round(time.Millisecond),
		"class", c.cfg.Plan.Class, "default", c.cfg.Plan.IsDefault)
	c.loop(runCtx, inf)
	return nil
}

// discoveryTries bounds the attempts to learn whether ServiceCIDRs are served.
const discoveryTries = 5

// discoverServiceCIDRs reports whether the apiserver serves ServiceCIDRs,
// trying a few times a second apart before it gives up with an error.
func (c *Controller) discoverServiceCIDRs(ctx context.Context) (bool, error) {
	var err error
	for i := range discoveryTries {
		if i > 0 {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		var ok bool
		ok, err = servesServiceCIDRs(cctx, c.client.Discovery())
		cancel()
		if err == nil {
			c.log.Info("Service CIDRs", "flag", c.cfg.ServiceCIDRs, "serviceCIDRObjects", ok)
			return ok, nil
		}
	}
	return false, fmt.Errorf("lb controller: %w", err)
}

// changed records that the Service key (zero for other objects) changed and
// wakes the sync loop.
func (c *Controller) changed(key model.ServiceKey) {
	if key != (model.ServiceKey{}) {
		c.mu.Lock()
		c.dirty[key] = struct{}{}
		c.mu.Unlock()
	}
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// takeDirty returns and clears the Services changed since the last call.
func (c *Controller) takeDirty() map[model.ServiceKey]struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirty
	c.dirty = map[model.ServiceKey]struct{}{}
	return d
}

// loop recomputes once at start, then after every change (collecting changes
// for coalesce first), at every resync tick, and when a backed-off write is
// due, until ctx ends.
func (c *Controller) loop(ctx context.Context, inf *informerSet) {
	resync := time.NewTicker(c.cfg.Resync)
	defer resync.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()

	full := true
	for {
		retryAt := c.sync(ctx, inf, full, time.Now())
		retry.Stop()
		if !retryAt.IsZero() {
			retry.Reset(max(time.Until(retryAt), coalesce))
		}
		full = false
		select {
		case <-ctx.Done():
			return
		case <-c.signal:
		case <-resync.C:
			full = true
		case <-retry.C:
		}
		wait := time.NewTimer(coalesce)
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
		// Changes during the wait are in this recompute.
		select {
		case <-c.signal:
		default:
		}
	}
}

// ingressIPs returns the addresses (or host names) of ingress, for messages.
func ingressIPs(ingress []corev1.LoadBalancerIngress) []string {
	out := make([]string, 0, len(ingress))
	for _, in := range ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else if in.Hostname != "" {
			out = append(out, in.Hostname)
		}
	}
	return out
}
