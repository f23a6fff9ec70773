package file

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/controlplane"
)

func nsDoc(name string) string {
	return "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n"
}

// loadCached decodes the manifests in dir through c (none when nil).
func loadCached(t *testing.T, dir string, c *Cache) ([]controlplane.Object, []error) {
	t.Helper()
	files, err := manifestFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, errs, err := readFiles(files, c)
	if err != nil {
		t.Fatal(err)
	}
	return objs, errs
}

func byOrigin(objs []controlplane.Object) map[string]*corev1.Namespace {
	out := map[string]*corev1.Namespace{}
	for _, o := range objs {
		out[o.Origin] = o.Obj.(*corev1.Namespace)
	}
	return out
}

// TestCacheDecodesOnlyWhatChanged: a reload through a Cache gives what a
// load without one gives, decodes only the documents that changed (the
// others are the very objects of the last load), and forgets what is gone.
func TestCacheDecodesOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	multi := filepath.Join(dir, "a.yaml")
	single := filepath.Join(dir, "b.yaml")
	writeFile(t, multi, nsDoc("one")+"---\n"+nsDoc("two")+"---\nkind: [broken\n")
	writeFile(t, single, nsDoc("three"))
	c := NewCache()
	objs1, errs1 := loadCached(t, dir, c)
	if len(objs1) != 3 || len(errs1) != 1 {
		t.Fatalf("first load: %d objects, errors %v", len(objs1), errs1)
	}
	plain, plainErrs := loadCached(t, dir, nil)
	if !reflect.DeepEqual(plain, objs1) || len(plainErrs) != 1 || plainErrs[0].Error() != errs1[0].Error() {
		t.Fatalf("cached load differs from a plain one:\n%v %v\n%v %v", objs1, errs1, plain, plainErrs)
	}
	first := byOrigin(objs1)

	// Unchanged: every object is the one decoded before, the error reported again.
	objs2, errs2 := loadCached(t, dir, c)
	for origin, ns := range byOrigin(objs2) {
		if first[origin] != ns {
			t.Errorf("%s decoded again though unchanged", origin)
		}
	}
	if len(errs2) != 1 || errs2[0].Error() != errs1[0].Error() {
		t.Errorf("second load errors %v, want %v", errs2, errs1)
	}

	// The second document changes; the first stays as decoded.
	writeFile(t, multi, nsDoc("one")+"---\n"+nsDoc("deux")+"---\nkind: [broken\n")
	got := byOrigin(mustObjs(loadCached(t, dir, c)))
	if got[multi+"#1"] != first[multi+"#1"] {
		t.Error("unchanged document #1 decoded again")
	}
	if got[multi+"#2"] == first[multi+"#2"] || got[multi+"#2"].Name != "deux" {
		t.Errorf("changed document #2 is %v, want Namespace deux", got[multi+"#2"].Name)
	}
	if got[single+"#1"] != first[single+"#1"] {
		t.Error("unchanged file decoded again")
	}

	// Removed: its objects are gone, and so is what the cache kept of it.
	if err := os.Remove(single); err != nil {
		t.Fatal(err)
	}
	got = byOrigin(mustObjs(loadCached(t, dir, c)))
	if _, ok := got[single+"#1"]; ok || len(got) != 2 {
		t.Errorf("after removing %s: %v", single, got)
	}
	if _, ok := c.files[single]; ok {
		t.Errorf("cache still holds removed %s", single)
	}
	if len(c.docs) != 3 {
		t.Errorf("cache holds %d documents, want the 3 of %s", len(c.docs), multi)
	}
}

func mustObjs(objs []controlplane.Object, _ []error) []controlplane.Object { return objs }

// TestCacheSeesWritesInPlace: a file rewritten in place with the same size
// and mtime is still read again (its ctime moved), and Forget makes the next
// load read a file whatever its identity.
func TestCacheSeesWritesInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	writeFile(t, path, nsDoc("aaa"))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache()
	loadCached(t, dir, c)
	time.Sleep(10 * time.Millisecond) // past the file system's timestamp granularity
	writeFile(t, path, nsDoc("bbb"))
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got := byOrigin(mustObjs(loadCached(t, dir, c)))[path+"#1"].Name; got != "bbb" {
		t.Fatalf("after a same-size write in place with the old mtime: %s, want bbb", got)
	}

	// Forget: a stale identity in the cache is not trusted.
	f := c.files[path]
	f.decoded.objs = nil
	c.files[path] = f
	c.Forget(filepath.Join(dir, ".", "a.yaml"))
	if got := byOrigin(mustObjs(loadCached(t, dir, c)))[path+"#1"]; got == nil || got.Name != "bbb" {
		t.Fatalf("after Forget: %v, want Namespace bbb", got)
	}
}

// TestCacheFailedLoadKeepsIt: a load that cannot read a file (here a
// directory in its place) fails and leaves the cache as the last good load
// left it.
func TestCacheFailedLoadKeepsIt(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), nsDoc("aaa"))
	c := NewCache()
	first := byOrigin(mustObjs(loadCached(t, dir, c)))
	bad := filepath.Join(dir, "b.yaml")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readFiles([]string{filepath.Join(dir, "a.yaml"), bad}, c); err == nil {
		t.Fatal("reading a directory as a manifest did not fail")
	}
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	for origin, ns := range byOrigin(mustObjs(loadCached(t, dir, c))) {
		if first[origin] != ns {
			t.Errorf("%s decoded again after a failed load", origin)
		}
	}
}

// TestCacheFollowsMovedDocuments: a document inserted before others (as the
// lab's publication does when a new object sorts first) moves them; they are
// not decoded again, and come under their new origins.
func TestCacheFollowsMovedDocuments(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	list := "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(nsDoc("in-list"), "\n"), "\n", "\n  ") + "\n"
	writeFile(t, path, nsDoc("one")+"---\n"+nsDoc("two")+"---\n"+list+"---\nkind: [broken\n")
	c := NewCache()
	objs, errs := loadCached(t, dir, c)
	if len(objs) != 3 || len(errs) != 1 {
		t.Fatalf("first load: %v, errors %v", objs, errs)
	}
	first := map[string]controlplane.Object{}
	for _, o := range objs {
		first[o.Obj.(*corev1.Namespace).Name] = o
	}
	writeFile(t, path, nsDoc("zero")+"---\n"+nsDoc("one")+"---\n"+nsDoc("two")+"---\n"+list+"---\nkind: [broken\n")
	objs, errs = loadCached(t, dir, c)
	plain, plainErrs := loadCached(t, dir, nil)
	if diff := cmp.Diff(plain, objs); diff != "" {
		t.Fatalf("cached load differs from a plain one (-plain +cached):\n%s", diff)
	}
	if len(errs) != 1 || errs[0].Error() != plainErrs[0].Error() || !strings.HasPrefix(errs[0].Error(), path+"#5:") {
		t.Errorf("errors %v, want %v", errs, plainErrs)
	}
	for _, o := range objs {
		name := o.Obj.(*corev1.Namespace).Name
		if was, ok := first[name]; ok && name != "in-list" && was.Obj != o.Obj {
			t.Errorf("%s moved from %s to %s and was decoded again", name, was.Origin, o.Origin)
		}
	}
}

// TestCacheKeepsTheState: a Cache's loads read the state file only when
// another writer changed it, and write it only when the allocations did.
func TestCacheKeepsTheState(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports: [{port: 80}]\n")
	c := NewCache()
	load := func() *Loaded {
		t.Helper()
		l, err := Load(Options{Path: dir, Now: testNow, Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ip := func(l *Loaded) string { return findService(l, "web").ClusterIPs[0].String() }
	statePath := StatePathFor(dir)
	first := load()
	id, _ := statFile(statePath)
	again := load()
	if id2, _ := statFile(statePath); id2 != id {
		t.Error("an unchanged state was written again")
	}
	if ip(again) != ip(first) {
		t.Fatalf("ClusterIP changed from %s to %s", ip(first), ip(again))
	}

	// Another writer (another agent on the same manifests) changes the
	// state: the next load reads it.
	st, err := readState(statePath)
	if err != nil {
		t.Fatal(err)
	}
	a := st.Services["default/web"]
	a.ClusterIPs = []string{"10.96.7.7"}
	st.Services["default/web"] = a
	if err := writeState(statePath, st); err != nil {
		t.Fatal(err)
	}
	if got := ip(load()); got != "10.96.7.7" {
		t.Errorf("after another writer gave web 10.96.7.7, the load gave %s", got)
	}
}

// TestAlign: a file's new documents are matched by position with its
// previous ones through an edit, an insertion, a removal and an append;
// what is new, or moved further (a of a swap), is left to the lookup by
// content.
func TestAlign(t *testing.T) {
	prev := func(contents ...string) []decodedDoc {
		var out []decodedDoc
		for _, c := range contents {
			out = append(out, decodedDoc{content: c})
		}
		return out
	}
	docs := func(contents ...string) [][]byte {
		var out [][]byte
		for _, c := range contents {
			out = append(out, []byte(c))
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		prev, now []string
		want      []int // index into prev, -1 for none
	}{
		{"unchanged", []string{"a", "b", "c"}, []string{"a", "b", "c"}, []int{0, 1, 2}},
		{"appended", []string{"a", "b"}, []string{"a", "b", "c"}, []int{0, 1, -1}},
		{"inserted first", []string{"a", "b", "c"}, []string{"z", "a", "b", "c"}, []int{-1, 0, 1, 2}},
		{"inserted inside", []string{"a", "b", "c"}, []string{"a", "z", "b", "c"}, []int{0, -1, 1, 2}},
		{"removed", []string{"a", "b", "c", "d"}, []string{"a", "c", "d"}, []int{0, 2, 3}},
		{"edited", []string{"a", "b", "c"}, []string{"a", "B", "c"}, []int{0, -1, 2}},
		{"swapped", []string{"a", "b", "c", "d"}, []string{"b", "a", "c", "d"}, []int{1, -1, 2, 3}},
		{"new file", nil, []string{"a"}, []int{-1}},
	} {
		p := prev(tc.prev...)
		got := align(p, docs(tc.now...))
		for i, w := range tc.want {
			switch {
			case w < 0 && got[i] != nil:
				t.Errorf("%s: document %d matched %q, want none", tc.name, i, got[i].content)
			case w >= 0 && got[i] != &p[w]:
				t.Errorf("%s: document %d matched %v, want previous %d", tc.name, i, got[i], w)
			}
		}
	}
}

// TestCacheReusesItsBuffers: a reload reads into the last load's file
// buffer and fills the maps of the load before; what earlier loads
// returned (objects, errors, origins) is unchanged by it, and every load
// gives what a load without a Cache gives.
func TestCacheReusesItsBuffers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "all.yaml")
	versions := []string{
		nsDoc("alpha-long-name") + "---\n" + nsDoc("beta") + "---\nkind: [broken\n",
		nsDoc("gamma") + "---\n" + nsDoc("beta"),
		nsDoc("delta") + "---\nkind: [also broken\n---\n" + nsDoc("epsilon"),
		nsDoc("alpha-long-name") + "---\n" + nsDoc("beta") + "---\nkind: [broken\n",
	}
	type got struct {
		names, origins, errs []string
	}
	snapshot := func(objs []controlplane.Object, errs []error) got {
		var g got
		for _, o := range objs {
			g.names = append(g.names, o.Obj.(*corev1.Namespace).Name)
			g.origins = append(g.origins, o.Origin)
		}
		for _, e := range errs {
			g.errs = append(g.errs, e.Error())
		}
		return g
	}
	c := NewCache()
	type load struct {
		objs []controlplane.Object
		errs []error
		was  got
	}
	var loads []load
	var buf []byte
	for i, v := range versions {
		writeFile(t, path, v)
		objs, errs := loadCached(t, dir, c)
		if i > 0 && (cap(c.spareBuf) == 0 || &c.spareBuf[:1][0] != &buf[:1][0]) {
			t.Errorf("load %d did not read into the last load's buffer", i)
		}
		buf = c.spareBuf
		if i > 0 && (c.spareDocs == nil || c.spareFiles == nil) {
			t.Errorf("load %d kept no maps to reuse", i)
		}
		want := snapshot(loadCached(t, dir, nil))
		if g := snapshot(objs, errs); !reflect.DeepEqual(g, want) {
			t.Errorf("load %d: %+v; a load without a Cache gives %+v", i, g, want)
		}
		loads = append(loads, load{objs, errs, snapshot(objs, errs)})
	}
	for i, l := range loads {
		if g := snapshot(l.objs, l.errs); !reflect.DeepEqual(g, l.was) {
			t.Errorf("load %d changed after the later loads: %+v, was %+v", i, g, l.was)
		}
	}
}
