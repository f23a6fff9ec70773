package file

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoadHostileNames: manifests whose objects carry names and namespaces
// that could be paths are loaded like any invalid object: each is left out
// with the apiserver's error naming its file and document, the valid object
// beside them is kept, and the only file the load writes is its state file.
func TestLoadHostileNames(t *testing.T) {
	hostile := []struct{ ns, name string }{
		{"default", ".."},
		{"default", "../../../../tmp/ESCAPED"},
		{"default", "a/b"},
		{"default", "a\x00b"},
		{"default", strings.Repeat("a", 300)},
		{"default", "под"},
		{"pod.default", "b"},
		{"../x", "b"},
	}
	var b strings.Builder
	for _, h := range hostile {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata: {name: %q, namespace: %q}\nspec: {ports: [{port: 80}]}\n", h.name, h.ns)
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: %q, namespace: %q}\nspec: {containers: [{name: c, image: x}]}\n", h.name, h.ns)
	}
	b.WriteString("---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n")
	dir := t.TempDir()
	manifest := filepath.Join(dir, "hostile.yaml")
	if err := os.WriteFile(manifest, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Load(Options{Path: dir, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Errors) != 2*len(hostile) {
		t.Fatalf("%d errors, want %d: %v", len(l.Errors), 2*len(hostile), l.Errors)
	}
	for i, err := range l.Errors {
		origin := fmt.Sprintf("%s#%d: ", manifest, i+2) // #1 is the empty document before the first ---
		if msg := err.Error(); !strings.HasPrefix(msg, origin) || !strings.Contains(msg, "Invalid value") && !strings.Contains(msg, "must be no more than") {
			t.Errorf("error %d: %q: want it to start with %q and give the validation error", i, msg, origin)
		}
	}
	var kept []string
	for _, s := range l.Services {
		kept = append(kept, s.Namespace+"/"+s.Name)
	}
	if want := []string{"default/kubernetes", "default/web"}; !slices.Equal(kept, want) {
		t.Errorf("services %q, want %q", kept, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if want := []string{".svcnet-decoded", ".svcnet-state.json", "hostile.yaml"}; !slices.Equal(got, want) {
		t.Errorf("the directory holds %q after the load, want %q", got, want)
	}
	if _, err := os.Stat("/tmp/ESCAPED.yaml"); err == nil {
		t.Errorf("/tmp/ESCAPED.yaml exists")
	}
}
