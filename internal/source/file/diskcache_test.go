package file

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// exactlyCached are documents whose objects survive a protobuf round trip
// unchanged; notCached are ones that do not (an empty map or list comes
// back nil), which the disk cache must decode from YAML every time.
const (
	exactlyCached = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop, labels: {app: web}, annotations: {a: "1"}}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http, protocol: TCP}]
  externalTrafficPolicy: Local
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: legacy-1, namespace: shop, labels: {kubernetes.io/service-name: legacy}}
addressType: IPv6
ports: [{name: p, port: 8080, protocol: UDP}]
endpoints:
- addresses: ["fd00::1"]
  conditions: {ready: true, serving: true, terminating: false}
  nodeName: node1
  zone: a
  hints: {forZones: [{name: a}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}}
spec:
  nodeName: node1
  containers: [{name: c, image: nginx, ports: [{name: http, containerPort: 8080}]}]
status:
  phase: Running
  podIP: 192.168.1.5
  podIPs: [{ip: 192.168.1.5}]
  conditions: [{type: Ready, status: "True"}]
`
	notCached = `apiVersion: v1
kind: Service
metadata: {name: empty, namespace: shop}
spec:
  selector: {}
  ports: [{port: 80}]
`
)

// loadTwice loads dir cold (no cache file: every document decoded, the
// cache written), then as another process would (a new Cache, the file
// read), and returns both.
func loadTwice(t *testing.T, dir string) (cold, warm *Loaded) {
	t.Helper()
	cold, err := Load(Options{Path: dir, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	warm, err = Load(Options{Path: dir, Now: testNow, Cache: NewCache()})
	if err != nil {
		t.Fatal(err)
	}
	return cold, warm
}

// TestDiskCacheGivesWhatDecodingGives: objects read from the cache file are
// deeply equal to the documents decoded, for every kind and shape in the
// examples and above, and so is everything loaded from them.
func TestDiskCacheGivesWhatDecodingGives(t *testing.T) {
	dir := copySeed(t)
	writeFile(t, filepath.Join(dir, "extra.yaml"), exactlyCached+"---\n"+notCached)
	cold, warm := loadTwice(t, dir)
	if len(cold.Errors) > 0 {
		t.Fatalf("errors: %v", cold.Errors)
	}
	if diff := cmp.Diff(cold.Objects, warm.Objects); diff != "" {
		t.Errorf("objects from the cache differ (-decoded +cached):\n%s", diff)
	}
	if !reflect.DeepEqual(cold.API, warm.API) {
		t.Errorf("the control plane's result differs:\n%s", cmp.Diff(cold.API, warm.API))
	}
	if !reflect.DeepEqual(cold.Services, warm.Services) || !reflect.DeepEqual(cold.EndpointSlices, warm.EndpointSlices) {
		t.Error("the model differs")
	}

	disk := openDiskCache(DecodedPathFor(dir))
	// Every document but the pools (no protobuf encoding) and the one with
	// an empty selector is in the file.
	want := 0
	for _, o := range cold.Objects {
		if err := protoCodec.Encode(o.Obj, discard{}); err == nil {
			want++
		}
	}
	want-- // the Service with an empty selector
	if len(disk.have) != want {
		t.Errorf("the cache file holds %d documents, want %d", len(disk.have), want)
	}
	for _, o := range warm.Objects {
		if s, ok := o.Obj.(*corev1.Service); ok && s.Name == "empty" && s.Spec.Selector == nil {
			t.Error("Service empty lost its empty selector")
		}
	}

	// The warm load read the file: with two entries' contents swapped, the
	// two documents give each other's objects.
	var keys [][sha256.Size]byte
	for k := range disk.have {
		keys = append(keys, k)
	}
	a, b := keys[0], keys[1]
	disk.used = maps.Clone(disk.have)
	disk.used[a], disk.used[b] = disk.have[b], disk.have[a]
	if err := disk.write(); err != nil {
		t.Fatal(err)
	}
	swapped, err := Load(Options{Path: dir, Now: testNow, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range cold.Objects {
		if !reflect.DeepEqual(cold.Objects[i].Obj, swapped.Objects[i].Obj) {
			differ++
		}
	}
	if differ != 2 {
		t.Errorf("with two cache entries swapped, %d objects differ from the documents, want 2", differ)
	}
}

// TestResultOnlyLoadCachesDocuments: a one-shot load of the result alone
// lets the control plane default and allocate the decoded objects in
// place; the decode cache it writes still holds what the documents decode
// to, and a later load from it gives the same objects and result.
func TestResultOnlyLoadCachesDocuments(t *testing.T) {
	var dirs [2]string
	for i := range dirs {
		dirs[i] = copySeed(t)
		writeFile(t, filepath.Join(dirs[i], "extra.yaml"), exactlyCached+"---\n"+notCached)
	}
	dir := dirs[0]
	first, err := Load(Options{Path: dir, Now: testNow, ResultOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(Options{Path: dirs[1], Now: testNow}); err != nil {
		t.Fatal(err)
	}
	got, want := openDiskCache(DecodedPathFor(dir)).have, openDiskCache(DecodedPathFor(dirs[1])).have
	if len(want) == 0 || !maps.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("the decode cache holds %d documents, want the %d a load of everything keeps", len(got), len(want))
	}
	decoded, _, err := ReadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	fromCache, err := Load(Options{Path: dir, Now: testNow, ReadOnly: true, Cache: NewCache()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(decoded, fromCache.Objects); diff != "" {
		t.Errorf("objects from the cache differ from the documents (-decoded +cached):\n%s", diff)
	}
	if !reflect.DeepEqual(first.API.Services, fromCache.API.Services) {
		t.Errorf("the Services differ:\n%s", cmp.Diff(first.API.Services, fromCache.API.Services))
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// TestDiskCacheBadFiles: a cache file that is torn, from another format, or
// holds garbage is an empty cache, and the next load that may write replaces
// it; a read-only load writes none.
func TestDiskCacheBadFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), exactlyCached)
	path := DecodedPathFor(dir)
	if _, err := Load(Options{Path: dir, ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a read-only load wrote the cache file")
	}
	cold, _ := loadTwice(t, dir)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"torn":         good[:len(good)-7],
		"other format": append([]byte("svcnet decoded documents v0\n"), good[len(diskCacheHeader):]...),
		"garbage":      append([]byte(diskCacheHeader), []byte("0123456789012345678901234567890123\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")...),
		"bad payload":  append(append([]byte(diskCacheHeader), good[len(diskCacheHeader):len(diskCacheHeader)+sha256.Size]...), 3, 'x', 'y', 'z'),
	} {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Load(Options{Path: dir, Now: testNow, ReadOnly: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(cold.Objects, l.Objects); diff != "" {
			t.Errorf("%s: objects differ (-want +got):\n%s", name, diff)
		}
	}
	if _, err := Load(Options{Path: dir, Now: testNow}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != string(good) {
		t.Error("a load did not replace a bad cache file")
	}
}

// TestDiskCacheReadByFirstLoadOnly: a Cache reads the disk cache on its
// first successful load only, even when that load found no document: an
// entry written later (here one that would give another object) is never
// read by it, which decodes new documents from their text.
func TestDiskCacheReadByFirstLoadOnly(t *testing.T) {
	dir := t.TempDir()
	c := NewCache()
	if _, err := Load(Options{Path: dir, Cache: c, Now: testNow}); err != nil {
		t.Fatal(err)
	}
	doc := "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n"
	writeFile(t, filepath.Join(dir, "a.yaml"), doc)
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 81}}}}
	other.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Service"))
	p, ok := encodeExactly(other)
	if !ok {
		t.Fatal("the other Service does not survive a protobuf round trip")
	}
	disk := openDiskCache(DecodedPathFor(dir))
	disk.used[sha256.Sum256([]byte(doc))] = p
	if err := disk.write(); err != nil {
		t.Fatal(err)
	}
	l, err := Load(Options{Path: dir, Cache: c, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Objects) != 1 || l.Objects[0].Obj.(*corev1.Service).Name != "a" {
		t.Errorf("second load gave %v, want Service a decoded from its text", l.Objects)
	}
}

// TestDiskCacheRefreshedByLaterLoads: a long-lived Cache writes the disk
// cache again after a later load when the documents it decoded from their
// text since the file was read or written are a tenth of all or more, with
// every document it keeps; fewer, or a read-only load, leave the file as
// it is. What it writes is what a new process then decodes from.
func TestDiskCacheRefreshedByLaterLoads(t *testing.T) {
	dir := t.TempDir()
	svc := func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: s%d, namespace: default}\nspec: {ports: [{port: 80}]}\n", i)
	}
	add := func(from, to int) {
		for i := from; i < to; i++ {
			writeFile(t, filepath.Join(dir, fmt.Sprintf("s%03d.yaml", i)), svc(i))
		}
	}
	held := func() map[[sha256.Size]byte][]byte { return openDiskCache(DecodedPathFor(dir)).have }
	load := func(c *Cache, readOnly bool) {
		t.Helper()
		if _, err := Load(Options{Path: dir, Cache: c, Now: testNow, ReadOnly: readOnly}); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 1)
	c := NewCache()
	load(c, false)
	if n := len(held()); n != 1 {
		t.Fatalf("after the first load the file holds %d documents, want 1", n)
	}
	add(1, 21)
	load(c, false)
	have := held()
	for i := range 21 {
		if _, ok := have[sha256.Sum256([]byte(svc(i)))]; !ok {
			t.Errorf("after 20 documents were added the file lacks s%d", i)
		}
	}
	add(21, 22)
	load(c, false)
	if n := len(held()); n != 21 {
		t.Errorf("after one document of 22 was added the file holds %d, want the 21 it held", n)
	}
	ro := NewCache()
	load(ro, true)
	add(22, 40)
	load(ro, true)
	if n := len(held()); n != 21 {
		t.Errorf("after a read-only load the file holds %d, want the 21 it held", n)
	}
	fresh := NewCache()
	l, err := Load(Options{Path: dir, Cache: fresh, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.API.Services) != 41 { // with default/kubernetes
		t.Errorf("a new process loaded %d Services, want 41", len(l.API.Services))
	}
}
