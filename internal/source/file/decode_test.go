package file

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/controlplane"
	corev1 "k8s.io/api/core/v1"
)

func TestDecodeFile(t *testing.T) {
	data := `
# a comment-only document is skipped
---
apiVersion: v1
kind: Service
metadata: {name: a}
spec: {ports: [{port: 80}]}
---
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p1}}
- {apiVersion: v1, kind: Pod, metadata: {name: p2}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
---
apiVersion: v1
kind: Service
metadata: {name: b}
spec: {portz: []}
---
kind: Service
metadata: {name: c}
---
{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}}
`
	objs, errs := decodeAll("m.yaml", []byte(data))
	var names []string
	for _, o := range objs {
		names = append(names, o.Origin+"="+o.Obj.GetObjectKind().GroupVersionKind().Kind)
	}
	want := "m.yaml#2=Service m.yaml#4 items[0]=Pod m.yaml#4 items[1]=Pod m.yaml#8=Namespace"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("objects:\n got %s\nwant %s", got, want)
	}
	if _, ok := objs[0].Obj.(*corev1.Service); !ok {
		t.Fatalf("Service decoded as %T", objs[0].Obj)
	}
	wantErrs := []string{
		`m.yaml#5: unknown kind apps/v1 "Deployment": svcnet reads Service, EndpointSlice, Endpoints, Pod, Node and Namespace`,
		`m.yaml#6: Service: strict decoding error: unknown field "spec.portz"`,
		`m.yaml#7: object has no apiVersion or kind`,
	}
	if len(errs) != len(wantErrs) {
		t.Fatalf("errors = %v, want %d", errs, len(wantErrs))
	}
	for i, e := range errs {
		if e.Error() != wantErrs[i] {
			t.Errorf("error %d:\n got %s\nwant %s", i, e, wantErrs[i])
		}
	}
	if !errors.Is(errs[0], ErrUnknownKind) {
		t.Errorf("unknown kind error does not wrap ErrUnknownKind")
	}
}

func TestDecodeBrokenDocumentLeavesTheOthers(t *testing.T) {
	objs, errs := decodeAll("x.yaml", []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkey: [unclosed\n--- # next\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n"))
	if len(objs) != 2 || len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "x.yaml#2: parsing:") || objs[1].Origin != "x.yaml#3" {
		t.Fatalf("objs=%v errs=%v", objs, errs)
	}
	objs, errs = decodeAll("x.json", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}} {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"b"}}`))
	if len(objs) != 2 || len(errs) != 0 || objs[1].Origin != "x.json#2" {
		t.Fatalf("json stream: objs=%v errs=%v", objs, errs)
	}
}

func TestManifestFilesSkipsDotfilesAndOthers(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.yaml", "a.json", "c.yml", ".svcnet-state.json", "README.md", ".hidden.yaml"} {
		writeFile(t, dir+"/"+n, "")
	}
	got, err := manifestFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var base []string
	for _, f := range got {
		base = append(base, f[len(dir)+1:])
	}
	if strings.Join(base, ",") != "a.json,b.yaml,c.yml" {
		t.Fatalf("manifest files = %v", base)
	}
}

// decodeAll decodes a file without a cache.
func decodeAll(name string, data []byte) ([]controlplane.Object, []error) {
	d := decodeFile(name, data, decodeDocument)
	return d.objs, d.errs
}

func TestSplitDocuments(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a: 1\n", []string{"a: 1\n"}},
		{"---\na: 1\n", []string{"", "a: 1\n"}},
		{"a: 1\n---\nb: 2", []string{"a: 1\n", "b: 2"}},
		{"a: 1\n--- # next\nb: 2\n---", []string{"a: 1\n", "b: 2\n", ""}},
		{"a: 1\n---x\n----\n", []string{"a: 1\n---x\n----\n"}},
		{"a: |\n  ---\n---  \r\nb: 2\n", []string{"a: |\n  ---\n", "b: 2\n"}},
		{" \n{\"a\": 1}\n  {\"b\":[1, 2]}[3]\n\t\"x\" ", []string{`{"a": 1}`, `{"b":[1, 2]}`, "[3]", `"x"`}},
		{`{"kind":"Service","metadata":{"name":"}{"}}{"kind":"Pod"}`, []string{`{"kind":"Service","metadata":{"name":"}{"}}`, `{"kind":"Pod"}`}},
	} {
		data := []byte(c.in)
		docs, err := splitDocuments(data)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		var got []string
		for _, d := range docs {
			got = append(got, string(d))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("splitDocuments(%q) = %q, want %q", c.in, got, c.want)
		}
		// The documents are slices of data, not copies.
		for i := range data {
			data[i] = 'Z'
		}
		for i, d := range docs {
			if strings.Trim(string(d), "Z") != "" {
				t.Errorf("splitDocuments(%q): document %d %q is a copy, not a slice of the data", c.in, i+1, d)
			}
		}
	}
}

// decodeFile decodes a whole file in order, as a load without a cache
// does, for the tests' expectations.
func decodeFile(name string, data []byte, decode func(origin string, doc []byte) decoded) decoded {
	r := fileRead{path: name, data: data}
	r.docs, r.splitErr = splitDocuments(data)
	for i := range r.docs {
		r.origins = append(r.origins, docOrigin(name, i))
	}
	return decodeDocs(r, decode)
}
