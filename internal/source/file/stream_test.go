package file

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// splitStream splits data as a streamed read does; ok is false where the
// load reads the file whole instead.
func splitStream(t *testing.T, data []byte) (docs [][]byte, ok bool) {
	t.Helper()
	br := bufio.NewReaderSize(bytes.NewReader(data), streamBuffer)
	isJSON, known, err := startsJSON(br)
	if err != nil {
		t.Fatal(err)
	}
	if !known {
		return nil, false
	}
	emit := func(doc []byte) { docs = append(docs, bytes.Clone(doc)) }
	if isJSON {
		if ok, err = splitJSONStream(br, emit); err != nil {
			t.Fatal(err)
		}
		return docs, ok
	}
	if err := splitYAMLStream(br, emit); err != nil {
		t.Fatal(err)
	}
	return docs, true
}

var long = strings.Repeat("x", 3*streamBuffer)

// streamCases are the edge cases of splitting a stream: separators at the
// ends, comments, lines longer than the buffer, white space JSON does not
// allow, streams that do not parse.
var streamCases = []string{
	"",
	"\n",
	"a: 1\n",
	"a: 1",
	"---",
	"---\n",
	"---\na: 1\n---\n---   # comment\r\nb: 2\n---",
	"a: |\n  ---\n----\n---x\n--- y\n",
	"a: " + long + "\n---\nb: 2\n",
	"---" + strings.Repeat(" ", 2*streamBuffer) + "\nb: 2\n",
	"--- #" + long + "\nb: 2",
	"\u00a0a: 1\n",
	`{"a": 1}`,
	" \n\t{\"a\": 1}\n  {\"b\": [1, 2]}[3]\n\"x\" 4 ",
	`{"kind":"Service","metadata":{"name":"}{ ---"}}` + "\n" + `{"kind":"Pod","s":"` + long + `"}`,
	"\u00a0{\"a\": 1}",
	"{\"a\": 1}\u00a0",
	"{\"a\": 1",
	"{\"a\": 1} {",
	"[1, 2] x",
	strings.Repeat(" ", 2*streamBuffer) + "{\"a\": 1}",
}

// TestSplitStreamAsSplitDocuments: a stream splits into the documents
// splitDocuments gives for the whole file (an empty one as nil), or is
// read whole where it cannot tell (a JSON stream that does not parse, more
// leading white space than its buffer).
func TestSplitStreamAsSplitDocuments(t *testing.T) {
	cases := slices.Clone(streamCases)
	// Streams that split whole, but not as they are read: JSON values
	// with white space between them that JSON does not allow (the whole
	// read trims it at the ends), more white space first than the buffer.
	readWhole := map[string]bool{
		"\u00a0{\"a\": 1}": true,
		"{\"a\": 1}\u00a0": true,
		strings.Repeat(" ", 2*streamBuffer) + "{\"a\": 1}": true,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	lines := []string{"a: 1", "---", "--- # c", "---x", " ---", "", "  b: [1, 2]", "- c", "---\t", "\r"}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(lines[rng.IntN(len(lines))])
			if rng.IntN(8) > 0 {
				b.WriteString("\n")
			}
		}
		cases = append(cases, b.String())
	}
	streamed := 0
	for _, in := range cases {
		want, err := splitDocuments([]byte(in))
		got, ok := splitStream(t, []byte(in))
		name := in
		if len(name) > 60 {
			name = name[:60] + "…"
		}
		if !ok {
			// Read whole: only where the whole read fails, or finds more
			// than its buffer of white space first.
			if err == nil && !readWhole[in] {
				t.Errorf("%q: not streamed, but splits whole", name)
			}
			continue
		}
		streamed++
		if err != nil {
			t.Errorf("%q: streamed, but the whole read fails: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: streamed as %q, want %q", name, got, want)
		}
	}
	if streamed < len(cases)-8 {
		t.Errorf("only %d of %d streams streamed", streamed, len(cases))
	}
}

// TestOneShotLoadStreams: a one-shot load with a disk cache streams its
// files, decoding the documents the disk cache holds as it reads them and
// keeping the text of the others only, and gives what a load that reads
// every file whole gives (a Cache's): the same objects under the same
// origins, the same errors, the same result.
func TestOneShotLoadStreams(t *testing.T) {
	dir := copySeed(t)
	// Files above streamMin stream: a long comment, white space between
	// JSON values.
	pad := strings.Repeat("x", streamMin)
	writeFile(t, filepath.Join(dir, "extra.yaml"), exactlyCached+"---\n"+notCached+"---\n\n---\nkind: Nothing\n# "+pad+"\n")
	writeFile(t, filepath.Join(dir, "small.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: small, namespace: shop}\nspec: {ports: [{port: 80}]}\n")
	var js strings.Builder
	for i := range 50 {
		fmt.Fprintf(&js, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"j%d","namespace":"json"},"spec":{"selector":{"app":"j"},"ports":[{"port":%d}]}}`+"\n", i, 80+i)
		if i == 25 {
			js.WriteString(strings.Repeat("\n", streamMin))
		}
	}
	writeFile(t, filepath.Join(dir, "stream.json"), js.String())
	writeFile(t, filepath.Join(dir, "broken.json"), js.String()+`{"apiVersion":"v1","kind":"Service"`)
	if _, err := Load(Options{Path: dir, Now: testNow}); err != nil { // writes the disk cache
		t.Fatal(err)
	}

	for _, kinds := range [][]string{nil, KindsFor("Service")} {
		whole, err := Load(Options{Path: dir, Now: testNow, ReadOnly: true, Cache: NewCache()})
		if err != nil {
			t.Fatal(err)
		}
		one, err := Load(Options{Path: dir, Now: testNow, ReadOnly: true, Kinds: kinds})
		if err != nil {
			t.Fatal(err)
		}
		if kinds == nil {
			if diff := cmp.Diff(whole.Objects, one.Objects); diff != "" {
				t.Errorf("objects differ (-whole +streamed):\n%s", diff)
			}
		}
		if diff := cmp.Diff(errorStrings(whole.Errors), errorStrings(one.Errors)); kinds == nil && diff != "" {
			t.Errorf("errors differ (-whole +streamed):\n%s", diff)
		}
		if diff := cmp.Diff(whole.API.Services, one.API.Services); diff != "" {
			t.Errorf("kinds %v: Services differ (-whole +streamed):\n%s", kinds, diff)
		}
	}

	// The read itself: the documents the disk cache holds, and those of
	// kinds left out, are done and hold no text; the others are copies.
	c := &Cache{only: newKindFilter(KindsFor("Service"))}
	c.disk = openDiskCache(DecodedPathFor(dir))
	if !c.streams() {
		t.Fatal("a one-shot load with a disk cache does not stream")
	}
	r, err := c.read(filepath.Join(dir, "extra.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if r.data != nil || len(r.done) != 6 {
		t.Fatalf("extra.yaml read whole, or into %d documents, want streamed into 6", len(r.done))
	}
	// The Service (cached), the EndpointSlice and the Pod (skipped), the
	// empty selector (not cached), an empty document, a kind left out.
	wantDone := []bool{true, true, true, false, false, true}
	for i, done := range r.done {
		if done != wantDone[i] || (done != (r.docs[i] == nil) && i != 4) {
			t.Errorf("document %d: done %v with text %q, want done %v", i+1, done, r.docs[i], wantDone[i])
		}
	}
	if len(r.ready[0].objs) != 1 || r.ready[0].objs[0].Origin != r.origins[0] {
		t.Errorf("the cached Service decoded to %v", r.ready[0])
	}
	if r, err := c.read(filepath.Join(dir, "stream.json")); err != nil || len(r.done) != 50 || r.data != nil {
		t.Errorf("stream.json: %d documents streamed, error %v; want 50 streamed", len(r.done), err)
	}
	// A small file is read whole, into the buffer the next one reuses,
	// and its documents kept as a stream's.
	small, err := c.read(filepath.Join(dir, "small.yaml"))
	if err != nil || small.data != nil || len(small.done) != 1 || small.docs[0] != nil || len(small.ready[0].objs) != 1 {
		t.Errorf("small.yaml: error %v, data %q, done %v, documents %q; want its one cached document done", err, small.data, small.done, small.docs)
	}
	if spare := c.spareBuf; len(spare) == 0 || !strings.Contains(string(spare), "name: small") {
		t.Errorf("small.yaml's buffer is not kept for the next file: %q", spare)
	}
	if r, err := c.read(filepath.Join(dir, "broken.json")); err != nil || r.done != nil || r.splitErr == nil {
		t.Errorf("broken.json: streamed %v, error %v, split error %v; want read whole, failing to split", r.done != nil, err, r.splitErr)
	}
	if _, err := c.read(filepath.Join(dir, "missing.yaml")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v, want not found", err)
	}
	if _, err := c.read(dir); err == nil {
		t.Error("a directory read as a file")
	}
}

// FuzzSplitStream: a stream that splits as it is read gives the documents
// splitDocuments gives for the whole of it.
func FuzzSplitStream(f *testing.F) {
	for _, c := range streamCases {
		if len(c) < 1024 { // the long ones are the test's: a fuzzer mutates small inputs faster
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, err := splitDocuments(data)
		got, ok := splitStream(t, data)
		if !ok {
			return // read whole
		}
		if err != nil {
			t.Fatalf("%q: streamed, but the whole read fails: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: streamed as %q, want %q", data, got, want)
		}
	})
}

func errorStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
