package socklb

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
	"github.com/svcnet/svcnet/internal/model"
)

// LB is the socket load balancer attached to one cgroup. Its methods are safe
// for concurrent use.
type LB struct {
	mu      sync.Mutex
	objs    socklbObjects
	links   []link.Link
	slots   slots
	svcs    map[socklbSvcKey]svcState
	retired []svcState // slot ranges no services entry points to, not yet deleted
	grace   graceWaiter
	// graceMu is held by a Reap's grace period wait and by Close around
	// closing the grace maps, which lb.mu does not guard during the wait.
	graceMu sync.Mutex
	closed  bool
}

// svcState is what the maps hold for one frontend.
type svcState struct {
	base, count uint32
	affinitySec uint32
	sched       uint32
}

// Open loads the programs and their maps and attaches connect4/6,
// getpeername4/6, sendmsg4/6 and recvmsg4/6 to the cgroup v2 directory
// cgroupPath: every socket of a process in that cgroup or below it is
// translated from then on. Nothing is pinned; Close removes it all.
func Open(cgroupPath string) (*LB, error) { return open(cgroupPath, "") }

// open is Open, with the maps and attachments pinned in pins when it is not
// "" (OpenPinned).
func open(cgroupPath, pins string) (*LB, error) {
	lb := &LB{svcs: map[socklbSvcKey]svcState{}}
	if err := lb.load(pins); err != nil {
		return nil, err
	}
	if err := lb.grace.open(); err != nil {
		return nil, errors.Join(fmt.Errorf("socklb: %w", err), lb.Close())
	}
	for _, a := range lb.attachments() {
		l, err := attach(cgroupPath, pins, a.prog, a.typ)
		if err != nil {
			err = fmt.Errorf("socklb: attach %v to %s: %w", a.prog, cgroupPath, err)
			return nil, errors.Join(err, lb.Close())
		}
		lb.links = append(lb.links, l)
	}
	if pins != "" {
		if err := lb.adopt(); err != nil {
			return nil, errors.Join(fmt.Errorf("socklb: adopt %s: %w", pins, err), lb.Close())
		}
	}
	return lb, nil
}

// attachment is one program and the cgroup hook it attaches to.
type attachment struct {
	prog *ebpf.Program
	typ  ebpf.AttachType
}

func (lb *LB) attachments() []attachment {
	return []attachment{
		{lb.objs.SocklbConnect4, ebpf.AttachCGroupInet4Connect},
		{lb.objs.SocklbGetpeername4, ebpf.AttachCgroupInet4GetPeername},
		{lb.objs.SocklbConnect6, ebpf.AttachCGroupInet6Connect},
		{lb.objs.SocklbGetpeername6, ebpf.AttachCgroupInet6GetPeername},
		{lb.objs.SocklbSendmsg4, ebpf.AttachCGroupUDP4Sendmsg},
		{lb.objs.SocklbRecvmsg4, ebpf.AttachCGroupUDP4Recvmsg},
		{lb.objs.SocklbSendmsg6, ebpf.AttachCGroupUDP6Sendmsg},
		{lb.objs.SocklbRecvmsg6, ebpf.AttachCGroupUDP6Recvmsg},
		{lb.objs.SocklbRelease, ebpf.AttachCgroupInetSockRelease},
	}
}

// SetService makes frontend (an IPv4 or IPv6 address and port) of protocol
// proto translate to one of backends (of the same family), chosen at random
// per connect, or refuse with ECONNREFUSED when backends is empty. It
// replaces what was set for the frontend before; a connect racing the change
// sees the old set or the new one. The old set's slots stay in the backends
// map, retired, until Reap.
func (lb *LB) SetService(frontend netip.AddrPort, proto model.Protocol, backends []netip.AddrPort) error {
	return lb.SetServicePolicy(frontend, proto, backends, Policy{})
}

// SetServicePolicy is SetService choosing the backend by pol.
func (lb *LB) SetServicePolicy(frontend netip.AddrPort, proto model.Protocol, backends []netip.AddrPort, pol Policy) error {
	if err := bpfaddr.CheckFrontend(frontend, backends); err != nil {
		return fmt.Errorf("socklb: set service: %w", err)
	}
	p, err := bpfaddr.ProtoNumber(proto)
	if err != nil {
		return fmt.Errorf("socklb: set service %v: %w", frontend, err)
	}
	sec, err := affinitySeconds(pol.Affinity)
	if err != nil {
		return fmt.Errorf("socklb: set service %v/%s: %w", frontend, proto, err)
	}
	sched, err := schedNumber(pol.Scheduler)
	if err != nil {
		return fmt.Errorf("socklb: set service %v/%s: %w", frontend, proto, err)
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return fmt.Errorf("socklb: set service %v/%s: closed", frontend, proto)
	}
	key := serviceKey(frontend, p)
	next, err := lb.writeBackends(backends)
	if err != nil && len(lb.retired) > 0 {
		// The backends map may be full of retired slots: reap, then retry.
		if rerr := lb.reap(); rerr != nil {
			return fmt.Errorf("socklb: set service %v/%s: %w; %w", frontend, proto, err, rerr)
		}
		next, err = lb.writeBackends(backends)
	}
	if err != nil {
		return fmt.Errorf("socklb: set service %v/%s: %w", frontend, proto, err)
	}
	v := socklbSvcValue{Count: next.count, Base: next.base, AffinitySec: sec, Sched: sched}
	if err := lb.objs.Services.Put(&key, &v); err != nil {
		lb.dropSlots(next)
		return fmt.Errorf("socklb: set service %v/%s: %w", frontend, proto, err)
	}
	if prev, had := lb.svcs[key]; had && prev.count > 0 {
		lb.retired = append(lb.retired, prev)
	}
	next.affinitySec, next.sched = sec, sched
	lb.svcs[key] = next
	return nil
}

// writeBackends writes backends into a fresh slot range and returns it; on
// failure it leaves nothing behind.
func (lb *LB) writeBackends(backends []netip.AddrPort) (svcState, error) {
	next := svcState{count: uint32(len(backends))}
	if next.count == 0 {
		return next, nil
	}
	var err error
	if next.base, err = lb.slots.alloc(next.count); err != nil {
		return svcState{}, err
	}
	for i, be := range backends {
		slot, v := next.base+uint32(i), backendValue(be)
		if err := lb.objs.Backends.Put(&slot, &v); err != nil {
			lb.dropSlots(next)
			return svcState{}, fmt.Errorf("backend %v: %w", be, err)
		}
	}
	return next, nil
}

// DeleteService removes frontend of protocol proto; its connects are
// untouched from then on. Deleting a frontend that is not set is not an
// error. Its backends' slots stay in the backends map, retired, until Reap.
func (lb *LB) DeleteService(frontend netip.AddrPort, proto model.Protocol) error {
	p, err := bpfaddr.ProtoNumber(proto)
	if err != nil {
		return fmt.Errorf("socklb: delete service %v: %w", frontend, err)
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return fmt.Errorf("socklb: delete service %v/%s: closed", frontend, proto)
	}
	key := serviceKey(frontend, p)
	prev, had := lb.svcs[key]
	if !had {
		return nil
	}
	if err := lb.objs.Services.Delete(&key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("socklb: delete service %v/%s: %w", frontend, proto, err)
	}
	delete(lb.svcs, key)
	if prev.count > 0 {
		lb.retired = append(lb.retired, prev)
	}
	return nil
}

// Reap deletes the backend slots that SetService and DeleteService retired.
// A program run that read a services entry before it changed may look that
// entry's slots up until the run ends, so a slot is deleted only after every
// run in progress has ended: Reap waits for an RCU grace period first (about
// 10 ms on a busy 2-core machine), once for all it deletes. Deleting at once
// instead would let a connect racing a change find its slot gone and go
// untranslated. Call it after a batch of changes; SetService also reaps when
// the backends map is full. Reap does not hold the LB during the grace
// period: changes go on meanwhile, and what they retire waits for the next
// Reap.
func (lb *LB) Reap() error {
	lb.mu.Lock()
	if lb.closed {
		lb.mu.Unlock()
		return fmt.Errorf("socklb: reap: closed")
	}
	batch := lb.retired
	lb.retired = nil
	lb.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	lb.graceMu.Lock()
	err := lb.grace.wait()
	lb.graceMu.Unlock()
	lb.mu.Lock()
	defer lb.mu.Unlock()
	switch {
	case lb.closed:
		return nil // the maps are gone, and the slots with them
	case err != nil:
		lb.retired = append(lb.retired, batch...)
		return fmt.Errorf("socklb: reap: %w", err)
	}
	for _, s := range batch {
		lb.dropSlots(s)
	}
	return nil
}

func (lb *LB) reap() error {
	if len(lb.retired) == 0 {
		return nil
	}
	if err := lb.grace.wait(); err != nil {
		return err
	}
	for _, s := range lb.retired {
		lb.dropSlots(s)
	}
	lb.retired = lb.retired[:0]
	return nil
}

// dropSlots deletes the backends of s from the map and frees its range. A
// slot that cannot be deleted stays allocated, so it is never reused with a
// stale entry.
func (lb *LB) dropSlots(s svcState) {
	if s.count == 0 {
		return
	}
	for i := range s.count {
		slot := s.base + i
		if err := lb.objs.Backends.Delete(&slot); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return
		}
	}
	lb.slots.free(s.base)
}

// Close releases the programs and maps. Unpinned, they are detached from
// the cgroup and freed; pinned (OpenPinned), they stay attached and held,
// for the next OpenPinned to adopt, until Unpin. Close is idempotent.
func (lb *LB) Close() error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return nil
	}
	lb.closed = true
	var errs []error
	for _, l := range lb.links {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("socklb: detach: %w", err))
		}
	}
	lb.links = nil
	if err := lb.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("socklb: close objects: %w", err))
	}
	lb.graceMu.Lock()
	defer lb.graceMu.Unlock()
	if err := lb.grace.close(); err != nil {
		errs = append(errs, fmt.Errorf("socklb: %w", err))
	}
	return errors.Join(errs...)
}
