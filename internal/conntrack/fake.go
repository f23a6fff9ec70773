package conntrack

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Fake is an in-memory Table that keeps state the way the kernel does: one
// entry per original tuple and zone, deleted by tuple and (if non-zero) ID.
// It is safe for concurrent use.
type Fake struct {
	// ListErr and DeleteErr, when set for a family, make List and Delete of
	// that family fail with the error. ListErr wrapping ErrPartial makes
	// List return its flows along with the error, as an interrupted dump does.
	ListErr, DeleteErr map[ipfamily.Family]error

	mu    sync.Mutex
	flows map[tupleKey]Flow
}

// tupleKey is what identifies a conntrack entry in the kernel's hash.
type tupleKey struct {
	proto    uint8
	src, dst netip.AddrPort
	zone     uint16
}

func keyOf(f Flow) tupleKey {
	return tupleKey{proto: f.Proto, src: normAddrPort(f.OrigSrc), dst: normAddrPort(f.OrigDst), zone: f.Zone}
}

var _ Table = (*Fake)(nil)

// NewFake returns a Fake holding flows.
func NewFake(flows ...Flow) *Fake {
	f := &Fake{flows: map[tupleKey]Flow{}}
	f.Add(flows...)
	return f
}

// Add inserts flows, replacing any entry with the same original tuple, as a
// new connection would after the old entry expired.
func (f *Fake) Add(flows ...Flow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range flows {
		f.flows[keyOf(fl)] = fl
	}
}

// Flows returns all flows, sorted by protocol, original source and
// destination, and zone.
func (f *Fake) Flows() []Flow {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Flow, 0, len(f.flows))
	for _, fl := range f.flows {
		out = append(out, fl)
	}
	sortFlows(out)
	return out
}

// List implements Table.
func (f *Fake) List(fam ipfamily.Family) ([]Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.ListErr[fam]
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	var out []Flow
	for _, fl := range f.flows {
		if fl.Family() == fam {
			out = append(out, fl)
		}
	}
	sortFlows(out)
	return out, err
}

// Delete implements Table.
func (f *Fake) Delete(fam ipfamily.Family, flows []Flow) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.DeleteErr[fam]; err != nil {
		return 0, err
	}
	n := 0
	for _, fl := range flows {
		if fl.Family() != fam {
			return n, fmt.Errorf("delete flow %s: not %s", fl, fam)
		}
		k := keyOf(fl)
		cur, ok := f.flows[k]
		if !ok || (fl.ID != 0 && cur.ID != fl.ID) {
			continue
		}
		delete(f.flows, k)
		n++
	}
	return n, nil
}

func sortFlows(flows []Flow) {
	slices.SortFunc(flows, func(a, b Flow) int {
		return cmp.Or(
			cmp.Compare(a.Proto, b.Proto),
			a.OrigSrc.Compare(b.OrigSrc),
			a.OrigDst.Compare(b.OrigDst),
			cmp.Compare(a.Zone, b.Zone),
		)
	})
}
