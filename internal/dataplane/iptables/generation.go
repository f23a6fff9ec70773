package iptables

import (
	"context"
	"fmt"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// Generation returns the kernel's nf_tables ruleset generation, which every
// commit to any nf_tables table bumps (nft.Conn's Generation).
type Generation func(ctx context.Context) (uint32, error)

// GenerationWatch is the backend on iptables-nft, whose rules are nf_tables
// rules: Changed reports a change of any of them since the last Sync within
// one read of the ruleset generation, as the nftables plane does. The
// canary alone (Backend.Changed) notices a change only when the mangle
// table's canary chain is gone, and reads it at most every CanaryInterval:
// a firewall reset costs up to that long without Service traffic, and a
// flushed KUBE-SERVICES (canary intact) goes unnoticed until the proxier's
// periodic full sync. Other agents' commits (kubelet, CNI plugins) move the
// generation too; the proxier verifies with a full sync, rate-limited.
//
// Not for iptables-legacy, whose tables are not nf_tables'.
type GenerationWatch struct {
	*Backend
	gen Generation
	// last is the generation after the last Sync; have is unset before
	// one, and after a Cleanup.
	last uint32
	have bool
}

// WatchGeneration returns b with Changed reading gen.
func WatchGeneration(b *Backend, gen Generation) *GenerationWatch {
	return &GenerationWatch{Backend: b, gen: gen}
}

var _ dataplane.DataPlane = (*GenerationWatch)(nil)

// Sync programs t (Backend.Sync) and records the generation that follows
// its restores, so that Changed reports only later commits (as the
// nftables plane: a failed read keeps the previous one, a failed Sync is
// followed by a full one anyway).
func (w *GenerationWatch) Sync(ctx context.Context, t *servicetable.Table, full bool) (dataplane.Stats, error) {
	st, err := w.Backend.Sync(ctx, t, full)
	if g, gerr := w.gen(ctx); gerr == nil {
		w.last, w.have = g, true
	}
	return st, err
}

// Changed reports whether the ruleset generation moved since the last
// Sync. Every nf_tables commit moves it (a flush or a deleted canary too),
// so the canary (Backend.Changed) is asked only before the first Sync has
// recorded a generation: reading it is iptables-nft-save of the mangle
// table, which loads the whole ruleset (0.85–1.0 s at 10,000 Services under
// load) and held up syncs every CanaryInterval.
func (w *GenerationWatch) Changed(ctx context.Context) (bool, error) {
	if !w.have {
		return w.Backend.Changed(ctx)
	}
	g, err := w.gen(ctx)
	if err != nil {
		return false, fmt.Errorf("read nftables generation: %w", err)
	}
	return g != w.last, nil
}

// Cleanup removes the plane's chains (Backend.Cleanup); Changed reports no
// generation move until the next Sync.
func (w *GenerationWatch) Cleanup(ctx context.Context) error {
	w.have = false
	return w.Backend.Cleanup(ctx)
}
