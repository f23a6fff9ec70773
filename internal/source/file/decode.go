package file

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// Scheme holds the kinds a manifest may contain. Later parts of svcnet register
// their own kinds (e.g. address pools) here before the first load.
var Scheme = newScheme()

// knownKinds are the kinds accepted from manifests; any other decodable kind is
// still refused, by name.
var knownKinds = map[schema.GroupVersionKind]bool{
	corev1.SchemeGroupVersion.WithKind("Service"):            true,
	corev1.SchemeGroupVersion.WithKind("Pod"):                true,
	corev1.SchemeGroupVersion.WithKind("Node"):               true,
	corev1.SchemeGroupVersion.WithKind("Namespace"):          true,
	corev1.SchemeGroupVersion.WithKind("Endpoints"):          true,
	discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"): true,
	pool.SchemeGroupVersion.WithKind(pool.Kind):              true,
}

// RegisterKind adds a kind that manifests may contain; its type must already be in
// Scheme.
func RegisterKind(gvk schema.GroupVersionKind) { knownKinds[gvk] = true }

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, discoveryv1.AddToScheme, pool.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("file: building scheme: %v", err))
		}
	}
	return s
}

// ErrUnknownKind is wrapped by the error for an object of a kind svcnet does not read.
var ErrUnknownKind = errors.New("unknown kind")

// DocError is a manifest document that could not be decoded into an object.
type DocError struct {
	Origin string
	Err    error
}

func (e *DocError) Error() string { return e.Origin + ": " + e.Err.Error() }
func (e *DocError) Unwrap() error { return e.Err }

// manifestFiles returns path itself when it is a file, or the *.yaml, *.yml and
// *.json files directly inside it (not recursive, no dotfiles) sorted by name.
func manifestFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() || !isManifestName(e.Name()) {
			continue
		}
		out = append(out, filepath.Join(path, e.Name()))
	}
	sort.Strings(out)
	return out, nil
}

func isManifestName(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// docOrigin names document i (0-based) of the file name: "name#(i+1)".
func docOrigin(name string, i int) string { return name + "#" + strconv.Itoa(i+1) }

// decodeDocs decodes the documents of a file read with decode
// (decodeDocument, or a cache of it). Documents are numbered from 1 as a
// reader counts them: every "---" starts a new one, empty or not. A
// document that fails to decode becomes a DocError and is skipped; the
// others are returned. A file that does not split is one DocError.
func decodeDocs(r fileRead, decode func(origin string, doc []byte) decoded) decoded {
	if r.splitErr != nil {
		return decoded{errs: []error{&DocError{Origin: r.path, Err: fmt.Errorf("parsing: %w", r.splitErr)}}}
	}
	var out decoded
	for i, doc := range r.docs {
		d := decode(r.origins[i], doc)
		out.objs = append(out.objs, d.objs...)
		out.errs = append(out.errs, d.errs...)
	}
	return out
}

// decodeDocument decodes one YAML or JSON document strictly (unknown fields
// are errors, as kubectl --validate=strict); an empty one is no object. Kind
// List is expanded.
func decodeDocument(origin string, doc []byte) decoded {
	raw, err := utilyaml.ToJSON(doc)
	if err != nil {
		return decoded{errs: []error{&DocError{Origin: origin, Err: fmt.Errorf("parsing: %w", err)}}}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return decoded{}
	}
	o, e := decodeDoc(origin, raw)
	return decoded{objs: o, errs: e}
}

// splitDocuments returns the documents of a YAML stream (split at lines that start
// with "---"), or of a JSON stream (one or more concatenated values).
func splitDocuments(data []byte) ([][]byte, error) {
	// Documents are slices of data, not copies: a copy of each JSON
	// document doubled what a load of the lab's publication (5.4 MB at
	// 10,000 Services) held while it decoded.
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		var docs [][]byte
		dec := json.NewDecoder(bytes.NewReader(t))
		var m json.RawMessage // the value decoded, reused: only checked against t
		for {
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				return docs, nil
			} else if err != nil {
				return nil, fmt.Errorf("document %d: %w", len(docs)+1, err)
			}
			end := int(dec.InputOffset())
			if start := end - len(m); start >= 0 && end <= len(t) && bytes.Equal(t[start:end], m) {
				docs = append(docs, t[start:end:end])
			} else {
				docs = append(docs, bytes.Clone(m))
			}
		}
	}
	var docs [][]byte
	start := 0
	for at := 0; at < len(data); {
		end := len(data)
		if i := bytes.IndexByte(data[at:], '\n'); i >= 0 {
			end = at + i + 1
		}
		if rest, ok := bytes.CutPrefix(data[at:end], []byte("---")); ok && isSeparatorRest(rest) {
			docs = append(docs, emptyAsNil(data[start:at]))
			start = end
		}
		at = end
	}
	return append(docs, emptyAsNil(data[start:])), nil
}

func emptyAsNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b[:len(b):len(b)]
}

// isSeparatorRest reports whether what follows "---" on a line leaves it a document
// separator: nothing, spaces, or a comment.
func isSeparatorRest(rest []byte) bool {
	t := bytes.TrimSpace(rest)
	return len(t) == 0 || t[0] == '#'
}

var codecs = serializer.NewCodecFactory(Scheme, serializer.EnableStrict)

// decodeDoc decodes one JSON document: an object of a known kind, or a
// List of them.
func decodeDoc(origin string, raw []byte) ([]controlplane.Object, []error) {
	if apiVersion, kind, ok := sniffTypeMeta(raw); ok && !strings.HasSuffix(kind, "List") {
		gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
		if obj, ok := decodeKnown(gvk, raw); ok {
			return []controlplane.Object{{Origin: origin, Obj: obj}}, nil
		}
	}
	return decodeDocSlowly(origin, raw)
}

// decodeKnown decodes raw, of a known kind gvk, as the strict universal
// deserializer does (a new object of the scheme, filled by
// sigs.k8s.io/json's strict unmarshal) without reading raw's type again.
// ok is false when raw is not a valid object of that kind: the caller then
// says why as the deserializer does.
func decodeKnown(gvk schema.GroupVersionKind, raw []byte) (runtime.Object, bool) {
	if !knownKinds[gvk] {
		return nil, false
	}
	obj, err := Scheme.New(gvk)
	if err != nil {
		return nil, false
	}
	strict, err := kjson.UnmarshalStrict(raw, obj)
	if err != nil || len(strict) > 0 {
		return nil, false
	}
	compact(obj)
	return obj, true
}

// decodeDocSlowly is decodeDoc through encoding/json and the universal
// deserializer, whose errors it reports.
func decodeDocSlowly(origin string, raw []byte) ([]controlplane.Object, []error) {
	var tm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, []error{&DocError{Origin: origin, Err: fmt.Errorf("not an object: %w", err)}}
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		return nil, []error{&DocError{Origin: origin, Err: errors.New("object has no apiVersion or kind")}}
	}
	if tm.Kind == "List" || strings.HasSuffix(tm.Kind, "List") && len(tm.Items) > 0 {
		var objs []controlplane.Object
		var errs []error
		for i, item := range tm.Items {
			o, e := decodeDoc(fmt.Sprintf("%s items[%d]", origin, i), item)
			objs = append(objs, o...)
			errs = append(errs, e...)
		}
		return objs, errs
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if !knownKinds[gvk] {
		return nil, []error{&DocError{Origin: origin, Err: fmt.Errorf("%w %s %q: svcnet reads Service, EndpointSlice, Endpoints, Pod, Node and Namespace", ErrUnknownKind, tm.APIVersion, tm.Kind)}}
	}
	obj, _, err := codecs.UniversalDeserializer().Decode(raw, &gvk, nil)
	if err != nil {
		return nil, []error{&DocError{Origin: origin, Err: fmt.Errorf("%s: %w", tm.Kind, err)}}
	}
	compact(obj)
	return []controlplane.Object{{Origin: origin, Obj: obj}}, nil
}
