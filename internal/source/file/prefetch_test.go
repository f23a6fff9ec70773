package file

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPrefetchDecodesAsInOrder: a load that decodes its documents in
// parallel (enough of them, on 2 CPUs or more) gives what decoding them one
// after the other gives: the same objects, origins and errors, in the same
// order, for Services, a List, broken documents and the same content at two
// places, with and without a decode cache on disk, and through a Cache whose
// second load decodes only the changed documents.
func TestPrefetchDecodesAsInOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	dir := t.TempDir()
	var b strings.Builder
	for i := range 3 * prefetchMin {
		switch {
		case i%50 == 7:
			b.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: [broken\n")
		case i%50 == 8:
			b.WriteString("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: li-a}, spec: {ports: [{port: 80}]}}\n- {apiVersion: v1, kind: Service, metadata: {name: li-b}, spec: {ports: [{port: 80}]}}\n")
		case i%50 == 9:
			b.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: twice}\nspec: {ports: [{port: 80}]}\n")
		default:
			fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: ns}\nspec: {ports: [{port: %d}]}\n", i, 1000+i)
		}
		b.WriteString("---\n")
	}
	path := filepath.Join(dir, "all.yaml")
	writeFile(t, path, b.String())
	for i := range 2 * prefetchMin {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("one-%03d.yaml", i)),
			fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: one-%d}\nspec: {ports: [{port: 80}]}\n", i))
	}
	files, err := manifestFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want decoded
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := decodeFile(f, data, decodeDocument)
		want.objs, want.errs = append(want.objs, d.objs...), append(want.errs, d.errs...)
	}
	check := func(what string, c *Cache) {
		t.Helper()
		objs, errs, err := readFiles(files, c)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want.objs, objs); d != "" {
			t.Errorf("%s: objects (-in order +prefetched):\n%s", what, d)
		}
		if d := cmp.Diff(fmt.Sprint(want.errs), fmt.Sprint(errs)); d != "" {
			t.Errorf("%s: errors (-in order +prefetched):\n%s", what, d)
		}
		if len(c.pre.at) != 0 {
			t.Errorf("%s: %d prefetched documents left over", what, len(c.pre.at))
		}
	}
	check("no cache", &Cache{})
	disk := &Cache{disk: openDiskCache(DecodedPathFor(dir))}
	disk.disk.keep = true
	check("cold disk cache", disk)
	if len(disk.disk.decoded) == 0 {
		t.Fatal("no document recorded for the disk cache")
	}
	if err := disk.disk.write(); err != nil {
		t.Fatal(err)
	}
	warm := &Cache{disk: openDiskCache(DecodedPathFor(dir))}
	check("warm disk cache", warm)
	if len(warm.disk.used) == 0 {
		t.Error("the warm load used nothing of the disk cache")
	}
	c := NewCache()
	check("first load of a Cache", c)
	writeFile(t, filepath.Join(dir, "one-000.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: one-0}\nspec: {ports: [{port: 81}]}\n")
	data, err := os.ReadFile(filepath.Join(dir, "one-000.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want.objs[len(want.objs)-2*prefetchMin] = decodeFile(filepath.Join(dir, "one-000.yaml"), data, decodeDocument).objs[0]
	check("reload of a Cache", c)
}
