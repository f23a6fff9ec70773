package dataplane

import (
	"context"
	"errors"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// DataPlane keeps one node's kernel state equal to the service table.
type DataPlane interface {
	// Name is the plane's --data-plane value, also the proxy mode /proxyMode
	// reports.
	Name() string
	// Probe checks that the kernel has every feature the plane uses. An error
	// wraps ErrNotSupported when a feature is missing, and names it.
	Probe(ctx context.Context) error
	// Sync programs t, partially or fully (see the package doc).
	Sync(ctx context.Context, t *servicetable.Table, full bool) (Stats, error)
	// Changed reports whether the plane's kernel state may have been changed
	// by someone else since the last Sync.
	Changed(ctx context.Context) (bool, error)
	// Cleanup removes everything the plane may have programmed.
	Cleanup(ctx context.Context) error
}

// Explainer is what the tracer needs from a plane to explain and verify a
// packet's path: the plane's programmed state as nf_tables tables that the
// packet simulator (internal/nft/sim) runs, and which tables of a kernel
// read-back are the plane's.
type Explainer interface {
	// Render returns the tables Sync programs for t, as a fresh instance
	// would program them, without touching the kernel. A plane that
	// translates its rules into nf_tables tables fails on a rule it cannot
	// translate.
	Render(t *servicetable.Table) ([]*nft.Table, error)
	// Owns reports whether the table of this name is the plane's.
	Owns(table string) bool
}

// ErrNotSupported is wrapped by a Probe error when the kernel lacks a
// feature the plane needs (as cilium/ebpf's ErrNotSupported).
var ErrNotSupported = errors.New("not supported by this kernel")

// NotSupported returns err, with its text, wrapping ErrNotSupported as well:
// how a plane reports its kernel layer's own "missing feature" error.
func NotSupported(err error) error { return notSupported{err} }

type notSupported struct{ err error }

func (e notSupported) Error() string   { return e.err.Error() }
func (e notSupported) Unwrap() []error { return []error{e.err, ErrNotSupported} }

// Stats describes one Sync.
type Stats struct {
	// Full is set when the sync read the kernel state back and applied the
	// whole difference (asked for, or decided by the plane).
	Full bool
	// Ops counts kernel operations per family (rules, chains, set and map
	// elements added or deleted); 0 means nothing changed.
	Ops map[ipfamily.Family]int
	// Drift is set when a full sync found the kernel different from what the
	// plane last programmed (someone flushed or edited it).
	Drift    bool
	Duration time.Duration
}

// TotalOps returns the number of operations over all families.
func (s Stats) TotalOps() int {
	n := 0
	for _, v := range s.Ops {
		n += v
	}
	return n
}
