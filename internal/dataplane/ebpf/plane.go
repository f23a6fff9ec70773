package ebpf

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	cebpf "github.com/cilium/ebpf"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
	"github.com/svcnet/svcnet/internal/ebpf/tclb"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Name is the plane's --data-plane value.
const Name = "ebpf"

// SocketLB is the kernel boundary of the socket load balancer
// (internal/ebpf/socklb.LB): frontends set and deleted in BPF maps.
type SocketLB interface {
	SetServicePolicy(frontend netip.AddrPort, proto model.Protocol, backends []netip.AddrPort, pol socklb.Policy) error
	DeleteService(frontend netip.AddrPort, proto model.Protocol) error
	// Reap frees what SetService and DeleteService replaced, once no
	// connect in progress can still read it.
	Reap() error
	// Held returns every frontend held: at open, what an earlier load
	// balancer left in pinned maps (adopted).
	Held() ([]socklb.Held, error)
	Close() error
}

// ExternalLB is the kernel boundary of the tc load balancer
// (internal/ebpf/tclb.LB): frontends taking traffic from outside the node.
type ExternalLB interface {
	SetService(frontend netip.AddrPort, proto model.Protocol, backends []tclb.Backend, pol tclb.Policy) error
	DeleteService(frontend netip.AddrPort, proto model.Protocol) error
	// Held returns every frontend held: at open, what an earlier load
	// balancer left in pinned maps (adopted).
	Held() ([]tclb.Held, error)
	Close() error
}

// portKey identifies a service table entry.
type portKey struct {
	ID     string
	Family ipfamily.Family
}

// Plane is the eBPF data plane: the socket load balancer for connects on the
// node and the tc load balancer for connections from outside it, over the
// nftables rules for everything else (see the package doc).
type Plane struct {
	rules dataplane.DataPlane
	open  func() (SocketLB, error)
	unpin func() error
	// openExt loads the tc load balancer for the node as the service table
	// describes it (nil: never; a nil ExternalLB: none for this node, whose
	// traffic from outside then meets the rules).
	openExt func(servicetable.NodeConfig) (ExternalLB, error)
	// extNode is the node the tc load balancer was opened for.
	extNode servicetable.NodeConfig
	extOpen bool
	// scheduler is for ports without one of their own.
	scheduler socklb.Scheduler
	families  map[ipfamily.Family]bool

	lb     SocketLB
	reaper *reaper
	ext    ExternalLB
	// sockets and external keep the load balancers' frontends (nil while
	// the load balancer is not open).
	sockets, external *layer
	// synced is false until a Sync succeeds, and after a failed one: the
	// next Sync then compares the whole table.
	synced bool
}

var _ dataplane.DataPlane = (*Plane)(nil)

// New returns the plane programming rules (the nftables plane, for the
// traffic the socket load balancer does not see or leaves alone) and the
// socket load balancer that open loads and attaches, at Probe or the first
// Sync, whichever comes first; Cleanup calls unpin to remove what open
// pinned (nil: nothing is pinned). Only ports of families are programmed
// (both when empty).
func New(rules dataplane.DataPlane, open func() (SocketLB, error), unpin func() error, families ...ipfamily.Family) *Plane {
	if len(families) == 0 {
		families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	}
	if unpin == nil {
		unpin = func() error { return nil }
	}
	p := &Plane{rules: rules, open: open, unpin: unpin, families: map[ipfamily.Family]bool{}}
	for _, f := range families {
		p.families[f] = true
	}
	return p
}

// SetScheduler makes s the scheduler of Service ports without one of their
// own (model.SchedulerAnnotation); socklb.Random unless set. Call it before
// the first Sync.
func (p *Plane) SetScheduler(s socklb.Scheduler) { p.scheduler = s }

// SetExternal makes the plane load the tc load balancer with open at the
// first Sync, for connections from outside the node to NodePorts,
// externalIPs and LB IPs (externalEntries), and again when the service
// table's node addresses, pod networks or masquerade mark change (connections it made then
// lose their translation). Call it before the first Sync.
func (p *Plane) SetExternal(open func(servicetable.NodeConfig) (ExternalLB, error)) { p.openExt = open }

// policy is e's policy with the plane's default scheduler applied. Maglev
// is for connections from outside (externalEntriesOf); the socket load
// balancer chooses at random for it.
func (p *Plane) policy(e entry) entry {
	if e.Policy.Scheduler == "" {
		e.Policy.Scheduler = p.scheduler
	}
	if e.Policy.Scheduler == "" || e.Policy.Scheduler == Maglev {
		e.Policy.Scheduler = socklb.Random
	}
	return e
}

// socketEntriesOf is socketEntries with the plane's default scheduler.
func (p *Plane) socketEntriesOf(sp *servicetable.ServicePort) []entry {
	es, _ := socketEntries(sp)
	for i := range es {
		es[i] = p.policy(es[i])
	}
	return es
}

// externalEntriesOf is externalEntries, under Maglev when the port's
// scheduler, else the plane's, is Maglev.
func (p *Plane) externalEntriesOf(sp *servicetable.ServicePort) []entry {
	es, _ := externalEntries(sp)
	if s := socklb.Scheduler(sp.Scheduler); s == Maglev || (s == "" && p.scheduler == Maglev) {
		for i := range es {
			es[i].External.Maglev = true
		}
	}
	return es
}

// Name returns "ebpf".
func (p *Plane) Name() string { return Name }

// Probe checks the nftables rules' kernel features, then loads and attaches
// the load balancers: a kernel without cgroup sock_addr or tc BPF programs
// fails here, with an error wrapping dataplane.ErrNotSupported.
func (p *Plane) Probe(ctx context.Context) error {
	if err := p.rules.Probe(ctx); err != nil {
		return err
	}
	return p.openLB()
}

func (p *Plane) openLB() error {
	if p.lb == nil {
		lb, err := p.open()
		if errors.Is(err, cebpf.ErrNotSupported) {
			return dataplane.NotSupported(fmt.Errorf("ebpf: socket load balancer: %w", err))
		} else if err != nil {
			return fmt.Errorf("ebpf: socket load balancer: %w", err)
		}
		held, err := lb.Held()
		if err != nil {
			return errors.Join(fmt.Errorf("ebpf: socket load balancer: %w", err), lb.Close())
		}
		p.sockets = newLayer("socket load balancer", socketFrontends{lb}, p.socketEntriesOf)
		for _, h := range held {
			e := entry{Frontend: h.Frontend, Protocol: h.Protocol, Backends: h.Backends, Policy: h.Policy}
			p.sockets.entries[e.key()] = e
		}
		p.lb = lb
		p.reaper = startReaper(lb)
	}
	return nil
}

// openExternal (re)opens the tc load balancer for node when it is not open
// for the same addresses and pod networks.
func (p *Plane) openExternal(node servicetable.NodeConfig) error {
	if p.openExt == nil || (p.extOpen && slices.Equal(p.extNode.NodePortAddresses, node.NodePortAddresses) &&
		slices.Equal(p.extNode.ClusterCIDRs, node.ClusterCIDRs) && p.extNode.Mark() == node.Mark()) {
		return nil
	}
	if err := p.closeExternal(); err != nil {
		return fmt.Errorf("ebpf: tc load balancer: %w", err)
	}
	ext, err := p.openExt(node)
	if errors.Is(err, cebpf.ErrNotSupported) {
		return dataplane.NotSupported(fmt.Errorf("ebpf: tc load balancer: %w", err))
	} else if err != nil {
		return fmt.Errorf("ebpf: tc load balancer: %w", err)
	}
	p.extOpen, p.extNode = true, node
	if ext == nil {
		return nil
	}
	held, err := ext.Held()
	if err != nil {
		return errors.Join(fmt.Errorf("ebpf: tc load balancer: %w", err), ext.Close())
	}
	p.ext = ext
	p.external = newLayer("tc load balancer", externalFrontends{ext}, p.externalEntriesOf)
	for _, h := range held {
		e := entry{Frontend: h.Frontend, Protocol: h.Protocol, External: &external{LocalPolicy: h.Policy.Local, Maglev: h.Policy.Maglev}}
		for _, b := range h.Backends {
			e.Backends = append(e.Backends, b.AddrPort)
			e.External.Local = append(e.External.Local, b.Local)
		}
		p.external.entries[e.key()] = e
	}
	return nil
}

func (p *Plane) closeExternal() error {
	var err error
	if p.ext != nil {
		err = p.ext.Close()
	}
	p.ext, p.external, p.extOpen = nil, nil, false
	return err
}

// Sync programs the nftables rules first (see the nftables plane), then the
// socket load balancer, then the tc load balancer: a partial sync changes
// the frontends of the table entries that changed (compared by pointer) and
// of those removed; a full one, the first and the one after a failure
// compare every entry. If the nftables rules fail, the load balancers are
// left as they were. If a map change fails, the changes this Sync made to
// the maps are undone (each frontend set back as it was) and the error
// returned; the next Sync compares everything.
func (p *Plane) Sync(ctx context.Context, t *servicetable.Table, full bool) (dataplane.Stats, error) {
	start := time.Now()
	st, err := p.rules.Sync(ctx, t, full)
	if err != nil {
		p.synced = false
		return st, err
	}
	if err := errors.Join(p.openLB(), p.openExternal(t.Node)); err != nil {
		p.synced = false
		return st, err
	}
	if st.Ops == nil {
		st.Ops = map[ipfamily.Family]int{}
	}
	whole := full || !p.synced
	st.Full = st.Full || whole
	err = p.syncMaps(t, whole, st.Ops)
	st.Duration = time.Since(start)
	p.synced = err == nil
	return st, err
}

// syncMaps brings both load balancers to t, adding their changes to ops.
func (p *Plane) syncMaps(t *servicetable.Table, whole bool, ops map[ipfamily.Family]int) error {
	sj, err := p.sockets.sync(t, whole, p.families)
	if err != nil {
		return err
	}
	if p.external != nil {
		xj, err := p.external.sync(t, whole, p.families)
		if err != nil {
			return errors.Join(err, sj.undo())
		}
		for f, n := range xj.ops {
			ops[f] += n
		}
	}
	for f, n := range sj.ops {
		ops[f] += n
	}
	if len(sj.undos) > 0 {
		if err := p.reaper.kick(); err != nil {
			return fmt.Errorf("ebpf: sync: %w", err)
		}
	}
	return nil
}

// Changed reports the nftables rules' drift: the socket load balancer's maps
// belong to this process alone.
func (p *Plane) Changed(ctx context.Context) (bool, error) { return p.rules.Changed(ctx) }

// Cleanup removes the nftables rules and the socket load balancer's pins:
// its programs are detached and its maps freed once no process holds them
// (unpinned, that is when the process that attached them exits).
func (p *Plane) Cleanup(ctx context.Context) error {
	return errors.Join(p.rules.Cleanup(ctx), p.unpin())
}

// Close releases the load balancers. The socket load balancer, unpinned, is
// detached (connects are then left to the nftables rules, which stay) and
// its maps freed; pinned, it stays attached for the next proxy to adopt.
// The tc load balancer is detached: new connections from outside meet the
// rules, and those it made lose their translation.
func (p *Plane) Close() error {
	var errs []error
	if p.lb != nil {
		p.reaper.stop()
		errs = append(errs, p.lb.Close())
		p.lb, p.reaper, p.sockets = nil, nil, nil
	}
	errs = append(errs, p.closeExternal())
	return errors.Join(errs...)
}
