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
	// port, whatever the caller asks.
	synced bool
}

func newLayer(name string, kernel frontends, entriesOf func(*servicetable.ServicePort) []entry) *layer {
	return &layer{name: name, kernel: kernel, entriesOf: entriesOf,
		ports: map[portKey]*servicetable.ServicePort{}, owned: map[portKey][]key{}, entries: map[key]entry{}}
}

// sync brings the kernel table to t's ports of families: the ports that
// changed (compared by pointer) and those removed, or every one when whole.
// It returns the journal of the changes (ops per family, and undo for a
// later failure). If a change fails, those made are undone and the error
// returned.
func (l *layer) sync(t *servicetable.Table, whole bool, families map[ipfamily.Family]bool) (*journal, error) {
	whole = whole || !l.synced
	seen := map[portKey]bool{}
	want := map[key]entry{}
	// changed are the ports to look at, with the keys of their entries.
	type port struct {
		sp   *servicetable.ServicePort
		keys []key
	}
	changed := map[portKey]port{}
	for _, sp := range t.Ports {
		if !families[sp.Family] {
			continue
		}
		pk := portKey{sp.ID, sp.Family}
		seen[pk] = true
		if !whole && l.ports[pk] == sp {
			continue
		}
		es := l.entriesOf(sp)
		keys := make([]key, len(es))
		for i, e := range es {
			keys[i] = e.key()
			want[keys[i]] = e
		}
		changed[pk] = port{sp, keys}
	}
	// The keys whose entry may change: every key of a changed or removed
	// port (whole: every key held, adopted ones included).
	var touched []key
	if whole {
		for k := range l.entries {
			touched = append(touched, k)
		}
	}
	for pk, keys := range l.owned {
		if _, ch := changed[pk]; !whole && (!seen[pk] || ch) {
			touched = append(touched, keys...)
		}
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
	for pk := range l.ports {
		if whole || !seen[pk] {
			delete(l.ports, pk)
			delete(l.owned, pk)
		}
	}
	for pk, c := range changed {
		l.ports[pk], l.owned[pk] = c.sp, c.keys
	}
	l.synced = true
	return j, nil
}
