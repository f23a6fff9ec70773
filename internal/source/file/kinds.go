package file

import (
	"bytes"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// A one-shot reader that shows some kinds only (svcnet get services) names
// them in Options.Kinds, with the kinds they depend on; a load then skips
// the documents of other kinds before decoding them, and reconciles the
// rest; without the EndpointSlices, the control plane builds none for the
// Services either. With 10,000 Services and their EndpointSlices, `svcnet
// get services -A --state` decodes and reconciles half the documents.
//
// What a kind depends on, in the embedded control plane: a Service's
// allocations and LoadBalancer status on the other Services, the
// Namespaces (a pool's namespace selector), the Nodes (a pool is refused
// that holds a node's address or pod CIDR) and the IPAddressPools; and,
// where a pool of mode nodeIP hands out node addresses, on the
// EndpointSlices (which nodes hold a ready endpoint), so on every kind:
// a load that finds such a pool reads everything. A Pod depends on the
// Nodes (its topology), a Node on nothing. KindsFor says so.

// KindsFor returns the kinds a load must read for a reader of kinds, or
// nil for every kind.
func KindsFor(kinds ...string) []string {
	set := map[string]bool{}
	for _, k := range kinds {
		switch k {
		case "Service":
			set["Service"], set["Namespace"], set["Node"], set[pool.Kind] = true, true, true, true
		case "Pod":
			set["Pod"], set["Node"] = true, true
		case "Node":
			set["Node"] = true
		default:
			return nil
		}
	}
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}

// kindFilter is the kinds a load reads; nil reads every kind.
type kindFilter map[string]bool

func newKindFilter(kinds []string) kindFilter {
	if len(kinds) == 0 {
		return nil
	}
	f := kindFilter{}
	for _, k := range kinds {
		f[k] = true
	}
	return f
}

// skips reports whether doc is of a kind f leaves out, by its top-level
// kind alone. A document whose kind is not told that simply (a List, a
// kind repeated, flow-style YAML) is not skipped: decoding it says what it
// is, or what is wrong with it.
func (f kindFilter) skips(doc []byte) bool {
	if f == nil {
		return false
	}
	kind, ok := docKind(doc)
	return ok && !f[kind] && !strings.HasSuffix(kind, "List")
}

// everything reports whether objs, decoded through f, need every kind
// after all: they hold Services and a pool of mode nodeIP, and f leaves
// out EndpointSlices.
func (f kindFilter) everything(objs []controlplane.Object) bool {
	if f == nil || !f["Service"] || f["EndpointSlice"] {
		return false
	}
	for _, o := range objs {
		if p, ok := o.Obj.(*pool.IPAddressPool); ok && p.Spec.Mode == string(alloc.ModeNodeIP) {
			return true
		}
	}
	return false
}

// keepOthers returns st, reconciled from the kinds f reads, with the
// creation times prev holds of the kinds f leaves out (a Service's
// EndpointSlices among them: built without their Pods, they are not the
// ones to stamp), so that persisting it loses none.
func (f kindFilter) keepOthers(st, prev controlplane.State) controlplane.State {
	if f == nil {
		return st
	}
	created := make(map[string]time.Time, len(st.Created))
	for key, t := range st.Created {
		if f[createdKind(key)] {
			created[key] = t
		}
	}
	for key, t := range prev.Created {
		if !f[createdKind(key)] {
			created[key] = t
		}
	}
	st.Created = created
	return st
}

// createdKind is the kind of a State.Created key, "Kind/namespace/name" or
// "Kind/name".
func createdKind(key string) string {
	kind, _, _ := strings.Cut(key, "/")
	return kind
}

// docKind returns the top-level kind of a manifest document: a JSON
// object's "kind", or the value of a YAML document's one line that starts
// with "kind:" (a top-level key: a nested one is indented, and so is any
// block scalar's text). ok is false when there is no such simple answer.
func docKind(doc []byte) (kind string, ok bool) {
	if t := bytes.TrimSpace(doc); len(t) > 0 && t[0] == '{' {
		_, kind, ok = sniffTypeMeta(t)
		return kind, ok && kind != ""
	}
	for line := range bytes.Lines(doc) {
		rest, found := bytes.CutPrefix(line, []byte("kind:"))
		if !found {
			continue
		}
		if ok {
			return "", false // repeated
		}
		v := string(rest)
		if i := strings.Index(v, " #"); i >= 0 {
			v = v[:i]
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		if v == "" || strings.ContainsAny(v, "\"'\\{}[],&*!|>%@`:#") {
			return "", false
		}
		kind, ok = v, true
	}
	return kind, ok
}
