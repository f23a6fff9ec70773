package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/proxy/metrics"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// ServiceHealth serves healthCheckNodePorts (healthcheck.ServiceHealthServer).
type ServiceHealth interface {
	SyncServices(map[types.NamespacedName]uint16) error
	SyncEndpoints(map[types.NamespacedName]int) error
}

// ProxyHealth tracks sync freshness for /healthz (healthcheck.ProxyHealthServer).
type ProxyHealth interface {
	QueuedUpdate(v1.IPFamily)
	Updated(v1.IPFamily)
}

// Deps are the proxier's collaborators. Store and DataPlane are required;
// the others may be nil.
type Deps struct {
	Store *model.Store
	// DataPlane programs the service table; the proxier drives it and knows
	// no backend.
	DataPlane dataplane.DataPlane
	// InterfaceAddrs lists the node's interface addresses (for
	// --nodeport-addresses CIDRs and as the "primary" fallback).
	InterfaceAddrs func() ([]netip.Addr, error)
	Conntrack      conntrack.Table
	ServiceHealth  ServiceHealth
	ProxyHealth    ProxyHealth
	Metrics        *metrics.Metrics
	Logger         klog.Logger
	// BeforeSync, when set, is called before every sync attempt, with whether
	// the proxier asks for a full one. (The backend may still make a partial
	// one full on its own: its first sync, a change of the node's addresses,
	// a new shard count; SyncResult.Full says what it did.)
	BeforeSync func(full bool)
	// OnSync, when set, is called after every sync attempt.
	OnSync func(SyncResult)
	// Events, when set, records an event on each Service (or Service
	// port) the node cannot serve, once per distinct reason, as the log
	// line does (see reportSkipped).
	Events record.EventRecorder
}

// SyncResult describes one sync attempt.
type SyncResult struct {
	dataplane.Stats
	Err      error
	Services int
	Skipped  int
	// ConntrackDeleted counts stale UDP/SCTP flows deleted after the sync.
	ConntrackDeleted int
}

// Proxier keeps this node's data plane equal to the model.
type Proxier struct {
	cfg   Config
	deps  Deps
	log   klog.Logger
	plane dataplane.DataPlane

	snap    *model.Snapshot
	nodeCfg servicetable.NodeConfig
	// asm holds every Service's entries; dirty the Services to rebuild.
	asm      *servicetable.Assembler
	dirty    map[model.ServiceKey]bool
	triggers []time.Time
	// reported remembers skip errors already logged, so each is logged once.
	reported map[string]bool
	// suspect is set when the data plane's state changed behind our back
	// (DataPlane.Changed); a full sync (kernel read-back) clears it. lastFullAt and lastFullDur
	// rate-limit such verifications (see fullAllowed).
	suspect     bool
	lastFullAt  time.Time
	lastFullDur time.Duration
	// udpDirty is set when a UDP or SCTP Service port changed since the
	// last conntrack cleanup.
	udpDirty bool
	// podCIDRs are this node's spec.podCIDRs as last seen non-empty (local
	// traffic detection in mode NodeCIDR); waitLogged is set once the wait
	// for them was logged.
	podCIDRs   []netip.Prefix
	waitLogged bool
	// sum follows every table built (see summary).
	sum summary
}

// New returns a proxier; it starts nothing until Run.
func New(cfg Config, deps Deps) (*Proxier, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil || deps.DataPlane == nil {
		return nil, errors.New("proxy: store and data plane are required")
	}
	log := deps.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	return &Proxier{
		cfg:      cfg,
		deps:     deps,
		log:      log,
		plane:    deps.DataPlane,
		asm:      servicetable.NewAssembler(servicetable.NodeConfig{}),
		dirty:    map[model.ServiceKey]bool{},
		reported: map[string]bool{},
	}, nil
}

// Run probes the data plane's kernel features, then follows the store and
// syncs until ctx ends. The first sync waits for the source to be synced, and
// is a full one: it adopts whatever a previous svcnet left, without flushing
// it. A failed probe ends Run with its error (wrapping
// dataplane.ErrNotSupported when a feature is missing) before anything is
// programmed.
func (p *Proxier) Run(ctx context.Context) error {
	if err := p.plane.Probe(ctx); err != nil {
		return fmt.Errorf("data plane %s: %w", p.plane.Name(), err)
	}
	sub := p.deps.Store.Subscribe()
	defer sub.Close()
	periodic := time.NewTicker(p.cfg.SyncPeriod)
	lastPeriodicFull := time.Now()
	defer periodic.Stop()
	driftTick := time.NewTicker(p.cfg.DriftCheckPeriod)
	defer driftTick.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()

	var (
		pending   bool
		full      = true
		lastSync  time.Time
		armed     bool
		failures  int
		syncedOne bool
	)
	schedule := func() {
		if !pending || armed || p.snap == nil || !p.snap.Synced || !p.localReady() {
			return
		}
		wait := time.Until(lastSync.Add(p.cfg.MinSyncPeriod))
		if failures > 0 {
			wait = max(wait, min(time.Duration(failures)*p.cfg.MinSyncPeriod, p.cfg.SyncPeriod, 30*time.Second), 100*time.Millisecond)
		}
		timer.Reset(max(wait, 0))
		armed = true
	}
	queue := func() {
		if !pending {
			p.queued()
		}
		pending = true
		schedule()
	}
	// Deliver the initial state.
	p.absorb(sub.Next())
	queue()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.C():
			p.absorb(sub.Next())
			queue()
		case <-periodic.C:
			// Every sync period: re-resolve node addresses (partial sync);
			// every FullSyncPeriod: read the tables back whatever happened.
			if time.Since(lastPeriodicFull) >= p.cfg.FullSyncPeriod {
				full, lastPeriodicFull = true, time.Now()
			}
			queue()
		case <-driftTick.C:
			if syncedOne && (p.suspect || p.genMoved(ctx)) {
				if !p.suspect {
					p.log.V(2).Info("data plane changed behind our back; verifying it", "dataPlane", p.plane.Name())
				}
				p.suspect = true
				if p.fullAllowed() {
					full = true
					queue()
				}
			}
		case <-timer.C:
			armed = false
			began := time.Now()
			res := p.sync(ctx, full)
			pending = false
			// Only a sync that changed the kernel closes the min-sync-period
			// gate: a periodic sync that found nothing to do must not delay the
			// next real change by up to MinSyncPeriod.
			if res.Err != nil || res.TotalOps() > 0 {
				lastSync = began
			}
			if res.Err != nil {
				failures++
				full = true
				pending = true
				schedule()
				continue
			}
			failures, full, syncedOne = 0, false, true
		}
	}
}

// absorb takes a snapshot and its changes into the proxier's state.
func (p *Proxier) absorb(snap *model.Snapshot, ch model.Changes) {
	p.snap = snap
	if n := snap.Node(p.cfg.NodeName); n != nil && len(n.PodCIDRs) > 0 {
		p.podCIDRs = n.PodCIDRs
	}
	svcChanges, epChanges := 0, 0
	for _, c := range ch.Services {
		p.dirty[c.Key] = true
		var oldSvc, newSvc *model.Service
		var oldSl, newSl []*model.EndpointSlice
		if c.Old != nil {
			oldSvc, oldSl = c.Old.Service, c.Old.Slices
		}
		if c.New != nil {
			newSvc, newSl = c.New.Service, c.New.Slices
			for _, sl := range newSl {
				if sl.TriggerTime != 0 && !slices.Contains(oldSl, sl) {
					p.triggers = append(p.triggers, time.Unix(0, sl.TriggerTime))
				}
			}
		}
		if oldSvc != newSvc {
			svcChanges++
		}
		if !slices.Equal(oldSl, newSl) {
			epChanges++
		}
	}
	if m := p.deps.Metrics; m != nil {
		m.ServiceChangesTotal.Add(float64(svcChanges))
		m.EndpointChangesTotal.Add(float64(epChanges))
		m.ServiceChangesPending.Set(float64(len(p.dirty)))
	}
}

func (p *Proxier) queued() {
	now := time.Now()
	for _, f := range p.cfg.Families {
		if p.deps.ProxyHealth != nil {
			p.deps.ProxyHealth.QueuedUpdate(apiFamily(f))
		}
		if m := p.deps.Metrics; m != nil {
			m.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(f.String()).Set(float64(now.Unix()))
		}
	}
}

// fullAllowed rate-limits drift verifications to a tenth of the time: a
// full sync that took d may run again d×10 after the previous one (on a node
// where other agents commit all the time, verifying a 10k-Service table on
// every commit would burn a core).
func (p *Proxier) fullAllowed() bool {
	return time.Since(p.lastFullAt) >= 10*p.lastFullDur
}

// genMoved reports whether the data plane's kernel state may have changed
// behind our back since the last sync (DataPlane.Changed).
func (p *Proxier) genMoved(ctx context.Context) bool {
	moved, err := p.plane.Changed(ctx)
	if err != nil {
		p.log.V(2).Info("drift check failed", "dataPlane", p.plane.Name(), "err", err)
		return false
	}
	return moved
}

// localReady reports whether local traffic detection can be rendered. In
// mode NodeCIDR it needs the Node's podCIDRs, and until they are known
// nothing is programmed, as kube-proxy waits for them before it starts:
// rules without detection would masquerade no off-cluster traffic. Once
// seen, they stay in use if the Node loses them or goes away.
func (p *Proxier) localReady() bool {
	if p.cfg.DetectLocalMode != LocalModeNodeCIDR || p.podCIDRs != nil {
		return true
	}
	if !p.waitLogged {
		p.waitLogged = true
		p.log.Info("Waiting for the Node's spec.podCIDRs before the first sync (detect-local-mode NodeCIDR)", "node", p.cfg.NodeName)
	}
	return false
}

// localDetection fills the node settings that tell pod traffic from other
// traffic, by the configured mode.
func (p *Proxier) localDetection(nc *servicetable.NodeConfig) {
	switch p.cfg.DetectLocalMode {
	case LocalModeNodeCIDR:
		nc.ClusterCIDRs = p.podCIDRs
	case LocalModeBridgeInterface:
		nc.PodInterface = p.cfg.PodBridgeInterface
	case LocalModeInterfaceNamePrefix:
		nc.PodInterface, nc.PodInterfacePrefix = p.cfg.PodInterfaceNamePrefix, true
	default:
		nc.ClusterCIDRs = p.cfg.ClusterCIDRs
	}
}

// nodeConfig computes the service table's node settings from the snapshot
// and the node's interfaces.
func (p *Proxier) nodeConfig() servicetable.NodeConfig {
	node := p.snap.Node(p.cfg.NodeName)
	var ifaddrs []netip.Addr
	if p.deps.InterfaceAddrs != nil {
		a, err := p.deps.InterfaceAddrs()
		if err != nil {
			p.log.Error(err, "listing node addresses failed; NodePorts keep their previous addresses")
			return p.nodeCfg
		}
		ifaddrs = a
	}
	nc := servicetable.NodeConfig{
		NodeName:          p.cfg.NodeName,
		NodePortAddresses: nodePortAddresses(p.cfg.NodePortAddresses, node, ifaddrs),
		MasqueradeAll:     p.cfg.MasqueradeAll,
		MasqueradeMark:    p.cfg.MasqueradeMark,
		Egress:            p.cfg.Egress(),
	}
	p.localDetection(&nc)
	if node != nil {
		nc.Zone = node.Zone()
	}
	return nc
}

func sameNodeConfig(a, b servicetable.NodeConfig) bool {
	return a.NodeName == b.NodeName && a.Zone == b.Zone && a.MasqueradeAll == b.MasqueradeAll &&
		a.MasqueradeMark == b.MasqueradeMark && a.PodInterface == b.PodInterface && a.PodInterfacePrefix == b.PodInterfacePrefix &&
		slices.Equal(a.NodePortAddresses, b.NodePortAddresses) && slices.Equal(a.ClusterCIDRs, b.ClusterCIDRs) && a.Egress.Equal(b.Egress)
}

// table rebuilds the entries of dirty Services (all of them when the node's
// settings changed) and assembles the service table.
func (p *Proxier) table() *servicetable.Table {
	nc := p.nodeConfig()
	if !sameNodeConfig(nc, p.nodeCfg) {
		p.nodeCfg = nc
		p.asm.SetNode(nc)
		for _, st := range p.snap.Services() {
			p.dirty[st.Service.Key()] = true
		}
	}
	for k := range p.dirty {
		for _, sp := range p.asm.Entries(k) {
			if sp.Protocol != model.ProtocolTCP {
				p.udpDirty = true
			}
		}
		var ports []*servicetable.ServicePort
		var serr *servicetable.SkipError
		if st := p.snap.Service(k); st != nil && st.Service != nil {
			ports, serr = servicetable.BuildService(st, p.nodeCfg)
		}
		p.asm.Set(k, ports, serr)
		for _, sp := range ports {
			if sp.Protocol != model.ProtocolTCP {
				p.udpDirty = true
			}
		}
	}
	// A map keeps the storage of its largest size: after a full build (every
	// Service dirty) start a fresh one rather than keep ~80 bytes per
	// Service for a set that is almost always small.
	if len(p.dirty) > 1024 {
		p.dirty = map[model.ServiceKey]bool{}
	} else {
		clear(p.dirty)
	}
	return p.asm.Table()
}

// sync programs the current model once.
func (p *Proxier) sync(ctx context.Context, full bool) SyncResult {
	start := time.Now()
	if p.genMoved(ctx) {
		p.suspect = true
	}
	if !full && p.suspect && p.fullAllowed() {
		full = true
	}
	if p.deps.BeforeSync != nil {
		p.deps.BeforeSync(full)
	}
	t := p.table()
	p.sum.follow(t)
	p.reportSkipped(t)
	st, err := p.plane.Sync(ctx, t, full)
	res := SyncResult{Stats: st, Err: err, Services: len(t.Ports), Skipped: len(t.Errors)}
	end := time.Now()
	if err != nil {
		p.log.Error(err, "sync failed; the kernel keeps the previous rules and the next sync is a full one")
	} else {
		if st.Full {
			p.suspect, p.lastFullAt, p.lastFullDur = false, end, end.Sub(start)
		}
		p.afterSync(ctx, t, &res)
	}
	p.record(res, start, end)
	if p.deps.OnSync != nil {
		p.deps.OnSync(res)
	}
	return res
}

func (p *Proxier) afterSync(ctx context.Context, t *servicetable.Table, res *SyncResult) {
	if p.udpDirty && p.deps.Conntrack != nil {
		n, err := conntrack.Cleanup(klog.NewContext(ctx, p.log), p.deps.Conntrack, conntrackWant(p.sum.datagram))
		res.ConntrackDeleted = n
		if err != nil {
			p.log.Error(err, "conntrack cleanup failed; retrying on the next sync")
		} else {
			p.udpDirty = false
		}
	}
	if h := p.deps.ServiceHealth; h != nil {
		svcs := map[types.NamespacedName]uint16{}
		ready := map[types.NamespacedName]map[netip.Addr]bool{}
		for sp := range p.sum.health {
			nn := types.NamespacedName{Namespace: sp.Name.Namespace, Name: sp.Name.Name}
			svcs[nn] = sp.HealthCheckNodePort
			localReadyAddrs(ready, nn, sp.AllEndpoints)
		}
		eps := map[types.NamespacedName]int{}
		for nn, addrs := range ready {
			eps[nn] = len(addrs)
		}
		if err := h.SyncServices(svcs); err != nil {
			p.log.Error(err, "health check node ports")
		}
		if err := h.SyncEndpoints(eps); err != nil {
			p.log.Error(err, "health check endpoints")
		}
	}
	if ph := p.deps.ProxyHealth; ph != nil {
		for _, f := range p.cfg.Families {
			ph.Updated(apiFamily(f))
		}
	}
	p.log.V(2).Info("SyncProxyRules complete", "elapsed", res.Duration, "full", res.Full, "ops", res.TotalOps(),
		"services", res.Services, "skipped", res.Skipped, "drift", res.Drift)
}

// localReadyAddrs adds to into[nn] the addresses of the local, ready endpoints
// among eps. A healthCheckNodePort answers with their count, as kube-proxy's
// (LocalReadyEndpoints): ready ones only, so a node whose only local endpoints
// are terminating answers 503 and load balancers drain it, although traffic
// already there still reaches the serving terminating endpoints; one pod
// serving two ports counts once.
func localReadyAddrs(into map[types.NamespacedName]map[netip.Addr]bool, nn types.NamespacedName, eps []servicetable.Endpoint) {
	for _, e := range eps {
		if !e.Local || !e.Ready {
			continue
		}
		if into[nn] == nil {
			into[nn] = map[netip.Addr]bool{}
		}
		into[nn][e.Addr] = true
	}
}
