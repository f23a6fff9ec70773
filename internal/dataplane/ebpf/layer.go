package ebpf

import (
	"errors"
	"fmt"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// layer keeps one kernel table of frontends (the socket load balancer's, or
// the tc load balancer's) in step with the service table.
type layer struct {
	name   string
	kernel frontends
	// entriesOf is what the table holds for a port.
	entriesOf func(*servicetable.ServicePort) []entry
	// ports are the table entries last synced, and the keys of the entries
	// each one set.
	ports map[portKey]*servicetable.ServicePort
	owned map[portKey][]key
	// entries are what the kernel table holds, as far as every successful
	// call says.
	entries map[key]entry
	// synced is false until a sync succeeds: the first compares every
	// port, whatever the caller asks. seq is the Seq of the table last
	// synced.
	synced bool
	seq    uint64
}

func newLayer(name string, kernel frontends, entriesOf func(*servicetable.ServicePort) []entry) *layer {
	return &layer{name: name, kernel: kernel, entriesOf: entriesOf,
		ports: map[portKey]*servicetable.ServicePort{}, owned: map[portKey][]key{}, entries: map[key]entry{}}
}

// sync brings the kernel table to t's ports of families: the ports that
// changed (taken from t's Delta when it follows the table last synced,
// else compared by pointer) and those removed, or every one when whole.
// It returns the journal of the changes (ops per family, and undo for a
// later failure). If a change fails, those made are undone and the error
// returned.
func (l *layer) sync(t *servicetable.Table, whole bool, families map[ipfamily.Family]bool) (*journal, error) {
	whole = whole || !l.synced
	want := map[key]entry{}
	// changed are the ports to look at, with the keys of their entries;
	// gone the ports synced before that t lacks.
	type port struct {
		sp   *servicetable.ServicePort
		keys []key
	}
	changed := map[portKey]port{}
	var gone []portKey
	change := func(sp *servicetable.ServicePort) {
		es := l.entriesOf(sp)
		keys := make([]key, len(es))
		for i, e := range es {
			keys[i] = e.key()
			want[keys[i]] = e
		}
		changed[portKey{sp.ID, sp.Family}] = port{sp, keys}
	}
	if added, removed, ok := l.delta(t, whole, families); ok {
		for _, sp := range added {
			change(sp)
		}
		for _, pk := range removed {
			if _, ok := changed[pk]; !ok {
				gone = append(gone, pk)
			}
		}
	} else {
		seen := make(map[portKey]bool, len(l.ports))
		for _, sp := range t.Ports {
			if !families[sp.Family] {
				continue
			}
			pk := portKey{sp.ID, sp.Family}
			seen[pk] = true
			if whole || l.ports[pk] != sp {
				change(sp)
			}
		}
		for pk := range l.ports {
			if !seen[pk] {
				gone = append(gone, pk)
			}
		}
	}
	// The keys whose entry may change: every key of a changed or removed
	// port (whole: every key held, adopted ones included).
	var touched []key
	if whole {
		for k := range l.entries {
			touched = append(touched, k)
		}
	}
	for pk := range changed {
		touched = append(touched, l.owned[pk]...)
	}
	for _, pk := range gone {
		touched = append(touched, l.owned[pk]...)
	}
	for k := range want {
		touched = append(touched, k)
	}
	j := &journal{kernel: l.kernel, entries: l.entries, ops: map[ipfamily.Family]int{}}
	for _, k := range sortedKeys(touched) {
		w, ok := want[k]
		if err := j.apply(k, w, ok); err != nil {
			return j, errors.Join(fmt.Errorf("ebpf: sync %s: %w", l.name, err), j.undo())
		}
	}
	if whole {
		clear(l.ports)
		clear(l.owned)
	}
	for _, pk := range gone {
		delete(l.ports, pk)
		delete(l.owned, pk)
	}
	for pk, c := range changed {
		l.ports[pk], l.owned[pk] = c.sp, c.keys
	}
	l.synced, l.seq = true, t.Seq
	return j, nil
}

// delta returns, when t's Delta follows the table last synced (and the
// sync is not whole), the ports of families it adds and those it removes,
// ok false otherwise or when it disagrees with what was synced.
func (l *layer) delta(t *servicetable.Table, whole bool, families map[ipfamily.Family]bool) (added []*servicetable.ServicePort, removed []portKey, ok bool) {
	d := t.DeltaFrom(l.seq)
	if whole || d == nil {
		return nil, nil, false
	}
	for _, sp := range d.Removed {
		if !families[sp.Family] {
			continue
		}
		pk := portKey{sp.ID, sp.Family}
		if l.ports[pk] != sp {
			return nil, nil, false
		}
		removed = append(removed, pk)
	}
	for _, sp := range d.Added {
		if families[sp.Family] {
			added = append(added, sp)
		}
	}
	return added, removed, true
}
