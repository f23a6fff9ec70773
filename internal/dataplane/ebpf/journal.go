package ebpf

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/svcnet/svcnet/internal/ebpf/tclb"
	"github.com/svcnet/svcnet/internal/ipfamily"
)

// frontends is a kernel table of frontends: the socket load balancer's
// maps, or the tc load balancer's.
type frontends interface {
	set(e entry) error
	del(k key) error
}

// socketFrontends are the socket load balancer's.
type socketFrontends struct{ lb SocketLB }

func (s socketFrontends) set(e entry) error {
	return s.lb.SetServicePolicy(e.Frontend, e.Protocol, e.Backends, e.Policy)
}
func (s socketFrontends) del(k key) error { return s.lb.DeleteService(k.Frontend, k.Protocol) }

// externalFrontends are the tc load balancer's.
type externalFrontends struct{ lb ExternalLB }

func (x externalFrontends) set(e entry) error {
	bes := make([]tclb.Backend, len(e.Backends))
	for i, b := range e.Backends {
		bes[i] = tclb.Backend{AddrPort: b, Local: e.External.Local[i]}
	}
	return x.lb.SetService(e.Frontend, e.Protocol, bes, tclb.Policy{Local: e.External.LocalPolicy, Maglev: e.External.Maglev})
}
func (x externalFrontends) del(k key) error { return x.lb.DeleteService(k.Frontend, k.Protocol) }

// journal applies entry changes to a kernel table of frontends and
// remembers how to undo them.
type journal struct {
	kernel  frontends
	entries map[key]entry // what the load balancer holds; kept current
	ops     map[ipfamily.Family]int
	undos   []undo
}

// undo restores one key: to prev, or deleted when !had.
type undo struct {
	key  key
	prev entry
	had  bool
}

// apply makes key k hold w (want) or nothing (!ok). An unchanged key costs
// no call.
func (j *journal) apply(k key, w entry, ok bool) error {
	prev, had := j.entries[k]
	switch {
	case ok && had && prev.equal(w):
		return nil
	case ok:
		if err := j.kernel.set(w); err != nil {
			return err
		}
		j.entries[k] = w
	case had:
		if err := j.kernel.del(k); err != nil {
			return err
		}
		delete(j.entries, k)
	default:
		return nil
	}
	j.ops[ipfamily.Of(k.Frontend.Addr())]++
	j.undos = append(j.undos, undo{k, prev, had})
	return nil
}

// undo reverts the applied changes, newest first, and reports the keys it
// could not revert.
func (j *journal) undo() error {
	var failed []string
	for i := len(j.undos) - 1; i >= 0; i-- {
		u := j.undos[i]
		var err error
		if u.had {
			if err = j.kernel.set(u.prev); err == nil {
				j.entries[u.key] = u.prev
			}
		} else if err = j.kernel.del(u.key); err == nil {
			delete(j.entries, u.key)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%v/%s: %v", u.key.Frontend, u.key.Protocol, err))
		}
	}
	j.undos = nil
	if len(failed) > 0 {
		return fmt.Errorf("ebpf: undo failed for %d frontends: %v", len(failed), failed)
	}
	return nil
}

// sortedKeys returns ks sorted and without duplicates, for a deterministic
// order of map changes.
func sortedKeys(ks []key) []key {
	slices.SortFunc(ks, func(a, b key) int {
		if c := a.Frontend.Compare(b.Frontend); c != 0 {
			return c
		}
		return cmp.Compare(a.Protocol, b.Protocol)
	})
	return slices.Compact(ks)
}
