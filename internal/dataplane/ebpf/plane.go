package ebpf

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	cebpf "github.com/cilium/ebpf"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/ebpf/socklb"
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

// portKey identifies a service table entry.
type portKey struct {
	ID     string
	Family ipfamily.Family
}

// Plane is the eBPF data plane: the socket load balancer for connects on the
// node, over the nftables rules for everything else (see the package doc).
type Plane struct {
	rules dataplane.DataPlane
	open  func() (SocketLB, error)
	unpin func() error
	// scheduler is for ports without one of their own.
	scheduler socklb.Scheduler
	families  map[ipfamily.Family]bool

	lb     SocketLB
	reaper *reaper
	// ports are the table entries last synced to the socket load balancer,
	// and the keys of the entries each one set.
	ports map[portKey]*servicetable.ServicePort
	owned map[portKey][]key
	// entries are what the socket load balancer holds, as far as every
	// successful call says.
	entries map[key]entry
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
	p := &Plane{rules: rules, open: open, unpin: unpin, families: map[ipfamily.Family]bool{},
		ports: map[portKey]*servicetable.ServicePort{}, owned: map[portKey][]key{}, entries: map[key]entry{}}
	for _, f := range families {
		p.families[f] = true
	}
	return p
}

// SetScheduler makes s the scheduler of Service ports without one of their
// own (model.SchedulerAnnotation); socklb.Random unless set. Call it before
// the first Sync.
func (p *Plane) SetScheduler(s socklb.Scheduler) { p.scheduler = s }

// policy is e's policy with the plane's default scheduler applied.
func (p *Plane) policy(e entry) entry {
	if e.Policy.Scheduler == "" {
		e.Policy.Scheduler = p.scheduler
		if e.Policy.Scheduler == "" {
			e.Policy.Scheduler = socklb.Random
		}
	}
	return e
}

// Name returns "ebpf".
func (p *Plane) Name() string { return Name }

// Probe checks the nftables rules' kernel features, then loads and attaches
// the socket load balancer: a kernel without cgroup sock_addr programs fails
// here, with an error wrapping dataplane.ErrNotSupported.
func (p *Plane) Probe(ctx context.Context) error {
	if err := p.rules.Probe(ctx); err != nil {
		return err
	}
	return p.openLB()
}

func (p *Plane) openLB() error {
	if p.lb != nil {
		return nil
	}
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
	for _, h := range held {
		e := entry{Frontend: h.Frontend, Protocol: h.Protocol, Backends: h.Backends, Policy: h.Policy}
		p.entries[e.key()] = e
	}
	p.lb = lb
	p.reaper = startReaper(lb)
	return nil
}

// Sync programs the nftables rules first (see the nftables plane), then the
// socket load balancer: a partial sync changes the frontends of the table
// entries that changed (compared by pointer) and of those removed; a full
// one, the first and the one after a failure compare every entry. If the
// nftables rules fail, the socket load balancer is left as it was. If a map
// change fails, the changes this Sync made are undone (each frontend set
// back as it was) and the error returned; the next Sync compares everything.
func (p *Plane) Sync(ctx context.Context, t *servicetable.Table, full bool) (dataplane.Stats, error) {
	start := time.Now()
	st, err := p.rules.Sync(ctx, t, full)
	if err != nil {
		p.synced = false
		return st, err
	}
	if err := p.openLB(); err != nil {
		p.synced = false
		return st, err
	}
	if st.Ops == nil {
		st.Ops = map[ipfamily.Family]int{}
	}
	whole := full || !p.synced
	st.Full = st.Full || whole
	ops, err := p.syncSockets(t, whole)
	for f, n := range ops {
		st.Ops[f] += n
	}
	st.Duration = time.Since(start)
	p.synced = err == nil
	return st, err
}

// syncSockets brings the socket load balancer to t and returns the map
// changes per family.
func (p *Plane) syncSockets(t *servicetable.Table, whole bool) (map[ipfamily.Family]int, error) {
	seen := map[portKey]bool{}
	want := map[key]entry{}
	// changed are the ports to look at, with the keys of their entries.
	type port struct {
		sp   *servicetable.ServicePort
		keys []key
	}
	changed := map[portKey]port{}
	for _, sp := range t.Ports {
		if !p.families[sp.Family] {
			continue
		}
		pk := portKey{sp.ID, sp.Family}
		seen[pk] = true
		if !whole && p.ports[pk] == sp {
			continue
		}
		es, _ := socketEntries(sp)
		keys := make([]key, len(es))
		for i, e := range es {
			keys[i] = e.key()
			want[keys[i]] = p.policy(e)
		}
		changed[pk] = port{sp, keys}
	}
	// The keys whose entry may change: every key of a changed or removed
	// port (whole: every key held, adopted ones included).
	var touched []key
	if whole {
		for k := range p.entries {
			touched = append(touched, k)
		}
	}
	for pk, keys := range p.owned {
		if _, ch := changed[pk]; !whole && (!seen[pk] || ch) {
			touched = append(touched, keys...)
		}
	}
	for k := range want {
		touched = append(touched, k)
	}
	j := &journal{lb: p.lb, entries: p.entries, ops: map[ipfamily.Family]int{}}
	for _, k := range sortedKeys(touched) {
		w, ok := want[k]
		if err := j.apply(k, w, ok); err != nil {
			return j.ops, errors.Join(fmt.Errorf("ebpf: sync: %w", err), j.undo())
		}
	}
	if len(j.undos) > 0 {
		if err := p.reaper.kick(); err != nil {
			return j.ops, fmt.Errorf("ebpf: sync: %w", err)
		}
	}
	for pk := range p.ports {
		if whole || !seen[pk] {
			delete(p.ports, pk)
			delete(p.owned, pk)
		}
	}
	for pk, c := range changed {
		p.ports[pk], p.owned[pk] = c.sp, c.keys
	}
	return j.ops, nil
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

// Close releases the socket load balancer: unpinned, it is detached
// (connects are then left to the nftables rules, which stay) and its maps
// freed; pinned, it stays attached for the next proxy to adopt.
func (p *Plane) Close() error {
	if p.lb == nil {
		return nil
	}
	p.reaper.stop()
	err := p.lb.Close()
	p.lb, p.reaper = nil, nil
	return err
}
