package socklb

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/svcnet/svcnet/internal/model"
)

// LB is the socket load balancer attached to one cgroup. Its methods are safe
// for concurrent use.
type LB struct {
	mu     sync.Mutex
	objs   socklbObjects
	links  []link.Link
	slots  slots
	svcs   map[socklbSvcKey]svcState
	closed bool
}

// svcState is what the maps hold for one frontend.
type svcState struct {
	base, count uint32
}

// Open loads the programs and their maps and attaches connect4/6 and
// getpeername4/6 to the cgroup v2 directory cgroupPath: every socket of a
// process in that cgroup or below it is translated from then on. Nothing is
// pinned; Close removes it all.
func Open(cgroupPath string) (*LB, error) {
	lb := &LB{svcs: map[socklbSvcKey]svcState{}}
	if err := loadSocklbObjects(&lb.objs, nil); err != nil {
		return nil, fmt.Errorf("socklb: load: %w", err)
	}
	for _, a := range []struct {
		prog *ebpf.Program
		typ  ebpf.AttachType
	}{
		{lb.objs.SocklbConnect4, ebpf.AttachCGroupInet4Connect},
		{lb.objs.SocklbGetpeername4, ebpf.AttachCgroupInet4GetPeername},
		{lb.objs.SocklbConnect6, ebpf.AttachCGroupInet6Connect},
		{lb.objs.SocklbGetpeername6, ebpf.AttachCgroupInet6GetPeername},
	} {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupPath, Attach: a.typ, Program: a.prog})
		if err != nil {
			err = fmt.Errorf("socklb: attach %v to %s: %w", a.prog, cgroupPath, err)
			return nil, errors.Join(err, lb.Close())
		}
		lb.links = append(lb.links, l)
	}
	return lb, nil
}

// SetService makes frontend (an IPv4 or IPv6 address and port) of protocol
// proto translate to one of backends (of the same family), chosen at random
// per connect, or
// refuse with ECONNREFUSED when backends is empty. It replaces what was set
// for the frontend before; a connect racing the change sees the old set or
// the new one.
func (lb *LB) SetService(frontend netip.AddrPort, proto model.Protocol, backends []netip.AddrPort) error {
	if err := checkFrontend(frontend, backends); err != nil {
		return fmt.Errorf("socklb: set service: %w", err)
	}
	p, err := protoNumber(proto)
	if err != nil {
		return fmt.Errorf("socklb: set service %v: %w", frontend, err)
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return fmt.Errorf("socklb: set service %v/%s: closed", frontend, proto)
	}
	key := serviceKey(frontend, p)
	next := svcState{count: uint32(len(backends))}
	if next.count > 0 {
		if next.base, err = lb.slots.alloc(next.count); err != nil {
			return fmt.Errorf("socklb: set service %v/%s: %w", frontend, proto, err)
		}
		for i, be := range backends {
			slot, v := next.base+uint32(i), backendValue(be)
			if err := lb.objs.Backends.Put(&slot, &v); err != nil {
				lb.dropSlots(next)
				return fmt.Errorf("socklb: set service %v/%s: backend %v: %w", frontend, proto, be, err)
			}
		}
	}
	v := socklbSvcValue{Count: next.count, Base: next.base}
	if err := lb.objs.Services.Put(&key, &v); err != nil {
		lb.dropSlots(next)
		return fmt.Errorf("socklb: set service %v/%s: %w", frontend, proto, err)
	}
	prev, had := lb.svcs[key]
	lb.svcs[key] = next
	if had {
		lb.dropSlots(prev)
	}
	return nil
}

// DeleteService removes frontend of protocol proto; its connects are
// untouched from then on. Deleting a frontend that is not set is not an error.
func (lb *LB) DeleteService(frontend netip.AddrPort, proto model.Protocol) error {
	p, err := protoNumber(proto)
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
	lb.dropSlots(prev)
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

// Close detaches the programs from the cgroup and releases the programs and
// maps, which the kernel then frees. Close is idempotent.
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
	return errors.Join(errs...)
}
