package socklb

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// graceWaiter waits until every BPF program run in progress has ended. The
// kernel offers this to user space only as a side effect: an update of a
// map-in-map from a system call returns after an RCU grace period (so that
// the caller knows no program still uses the inner map it replaced), and
// the socket programs run under RCU. The outer map is used for nothing else.
type graceWaiter struct {
	outer, inner *ebpf.Map
}

func (g *graceWaiter) open() error {
	innerSpec := &ebpf.MapSpec{Name: "socklb_grace_in", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
	inner, err := ebpf.NewMap(innerSpec)
	if err != nil {
		return fmt.Errorf("grace map: %w", err)
	}
	outer, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "socklb_grace", Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1, InnerMap: innerSpec,
	})
	if err != nil {
		inner.Close()
		return fmt.Errorf("grace map: %w", err)
	}
	g.outer, g.inner = outer, inner
	return nil
}

// wait returns after an RCU grace period.
func (g *graceWaiter) wait() error {
	if err := g.outer.Put(uint32(0), g.inner); err != nil {
		return fmt.Errorf("wait for running programs: %w", err)
	}
	return nil
}

func (g *graceWaiter) close() error {
	var errs []error
	for _, m := range []*ebpf.Map{g.outer, g.inner} {
		if m != nil {
			if err := m.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close grace map: %w", err))
			}
		}
	}
	g.outer, g.inner = nil, nil
	return errors.Join(errs...)
}
