package file

import (
	"encoding/json"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// stateEncoder writes a State exactly as json.MarshalIndent(st, "", "  ")
// does, encoding again only the entries that changed since its last
// write: with 10,000 Services and their EndpointSlices, encoding the whole
// State takes about 30 ms, a third of a change in a lab's control-plane
// daemon, where one change alters one or two entries.
// TestStateEncoderMatchesMarshalIndent holds the two equal.
//
// It keeps each field's entries and its sorted keys from one write to the
// next, changed in place: building them anew for 30,000 entries was 5 MB
// of garbage per write.
//
// A one-shot encoder (a one-shot load's, which writes once) keeps nothing:
// the encodings it would keep were 3 MB at 10,000 Services, held while it
// wrote, where a one-shot reader's heap was largest.
type stateEncoder struct {
	oneShot  bool
	services encodedField[controlplane.ServiceAlloc]
	created  encodedField[time.Time]
	pools    encodedField[[]string]
}

// encodedField is what a stateEncoder keeps of one map field: its entries
// as last written, and the memory of its sorted keys.
type encodedField[T any] struct {
	entries map[string]encodedEntry[T]
	keys    []string
}

// encodedEntry is one map entry's value and its encoding ("KEY": VALUE,
// indented for its place), as last written.
type encodedEntry[T any] struct {
	v   T
	enc []byte
}

// The indentation of a State's map entries: State's fields are at one
// level, their entries at two.
const (
	fieldIndent = "  "
	entryIndent = "    "
)

// stringWriter is where a stateEncoder writes: a bufio.Writer on the
// file, or a bytes.Buffer. Its errors are the caller's to check (Flush).
type stringWriter interface {
	io.Writer
	io.StringWriter
}

// encode writes st to buf; on an error, what it wrote is to be discarded.
func (e *stateEncoder) encode(buf stringWriter, st controlplane.State) error {
	w := &fieldWriter{buf: buf, keep: !e.oneShot}
	buf.WriteString("{")
	writeField(w, "services", st.Services, &e.services, sameAlloc)
	writeField(w, "created", st.Created, &e.created, sameTime)
	writeField(w, "pools", st.Pools, &e.pools, sameStrings)
	if w.err != nil {
		*e = stateEncoder{oneShot: e.oneShot}
		return w.err
	}
	if w.n > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("}\n")
	return nil
}

// fieldWriter writes a State's fields: how many so far, and the first
// error; keep is whether the fields keep their entries' encodings.
type fieldWriter struct {
	buf  stringWriter
	keep bool
	n    int
	err  error
}

// writeField writes the map field name, left out when empty (omitempty),
// and keeps in f what its next write may reuse.
func writeField[T any](w *fieldWriter, name string, m map[string]T, f *encodedField[T], same func(a, b T) bool) {
	if len(m) == 0 || w.err != nil {
		*f = encodedField[T]{}
		return
	}
	if w.n > 0 {
		w.buf.WriteString(",")
	}
	w.n++
	w.buf.WriteString("\n" + fieldIndent + `"` + name + `": {`)
	w.err = f.encode(w.buf, m, same, w.keep)
	w.buf.WriteString("\n" + fieldIndent + "}")
}

// encode writes m's entries in key order, as MarshalIndent writes a map
// two levels in, reusing the encoding of an entry whose value is the same
// as last written; f then holds m's entries, unless keep is false.
func (f *encodedField[T]) encode(buf stringWriter, m map[string]T, same func(a, b T) bool, keep bool) error {
	if f.entries == nil && keep {
		f.entries = make(map[string]encodedEntry[T], len(m))
	}
	f.keys = slices.AppendSeq(f.keys[:0], maps.Keys(m))
	slices.Sort(f.keys)
	for i, k := range f.keys {
		v := m[k]
		ent, ok := f.entries[k]
		if !ok || !same(ent.v, v) {
			key, err := json.Marshal(k)
			if err != nil {
				return err
			}
			val, err := json.MarshalIndent(v, entryIndent, fieldIndent)
			if err != nil {
				return err
			}
			ent = encodedEntry[T]{v: v, enc: slices.Concat(key, []byte(": "), val)}
			if keep {
				f.entries[k] = ent
			}
		}
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n" + entryIndent)
		buf.Write(ent.enc)
	}
	if len(f.entries) > len(m) {
		for k := range f.entries {
			if _, ok := m[k]; !ok {
				delete(f.entries, k)
			}
		}
	}
	return nil
}

// sameTime reports whether a and b encode the same: the same instant in
// the same location.
func sameTime(a, b time.Time) bool { return a.Equal(b) && a.Location() == b.Location() }

// sameStrings reports whether a and b encode the same (nil is null, an
// empty list []).
func sameStrings(a, b []string) bool { return slices.Equal(a, b) && (a == nil) == (b == nil) }

// sameAlloc reports whether a and b encode the same (an empty list or map
// is left out as a nil one is).
func sameAlloc(a, b controlplane.ServiceAlloc) bool {
	return a.UID == b.UID && sameTime(a.Created, b.Created) && slices.Equal(a.ClusterIPs, b.ClusterIPs) &&
		maps.Equal(a.NodePorts, b.NodePorts) && a.HealthCheckNodePort == b.HealthCheckNodePort &&
		slices.Equal(a.LoadBalancerIPs, b.LoadBalancerIPs)
}
