package file

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// writePopulation writes n selector-less Services, each with one EndpointSlice
// of two endpoints, one manifest per object, into dir.
func writePopulation(tb testing.TB, dir string, n int) {
	tb.Helper()
	for i := range n {
		svc := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: svc-%05d
  namespace: bench
spec:
  ports:
  - name: http
    port: 80
    protocol: TCP
    targetPort: 8080
`, i)
		es := fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: svc-%05d-bench
  namespace: bench
  labels:
    kubernetes.io/service-name: svc-%05d
    endpointslice.kubernetes.io/managed-by: svcnet-bench
addressType: IPv4
ports:
- name: http
  port: 8080
  protocol: TCP
endpoints:
- addresses: ["192.168.%d.%d"]
  conditions: {ready: true}
- addresses: ["192.168.%d.%d"]
  conditions: {ready: true}
`, i, i, (2*i)/254%256, (2*i)%254+1, (2*i+1)/254%256, (2*i+1)%254+1)
		for name, b := range map[string]string{"Service.bench.svc-%05d.yaml": svc, "EndpointSlice.bench.svc-%05d-bench.yaml": es} {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf(name, i)), []byte(b), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// BenchmarkLoad10k: a process's load of 10,000 Services with one
// EndpointSlice each, one manifest per object, another process having left
// its decode cache.
func BenchmarkLoad10k(b *testing.B) {
	benchmarkLoad(b, func(string) {})
}

// BenchmarkColdLoad10k: the same without a decode cache: every document
// decoded from YAML.
func BenchmarkColdLoad10k(b *testing.B) {
	benchmarkLoad(b, func(dir string) {
		if err := os.Remove(DecodedPathFor(dir)); err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
	})
}

func benchmarkLoad(b *testing.B, before func(dir string)) {
	dir := b.TempDir()
	writePopulation(b, dir, 10000)
	if _, err := Load(Options{Path: dir}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		before(dir)
		b.StartTimer()
		l, err := Load(Options{Path: dir, ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(l.Errors) > 0 || len(l.Services) != 10001 {
			b.Fatalf("%d services, errors %v", len(l.Services), l.Errors)
		}
	}
}

// loadedPopulation loads a population of 10,000 Services and returns its
// objects and the state their load left.
func loadedPopulation(b *testing.B) ([]controlplane.Object, controlplane.State) {
	dir := b.TempDir()
	writePopulation(b, dir, 10000)
	l, err := Load(Options{Path: dir})
	if err != nil {
		b.Fatal(err)
	}
	prev, err := readState(StatePathFor(dir))
	if err != nil {
		b.Fatal(err)
	}
	return l.Objects, prev
}

func BenchmarkReconcile10k(b *testing.B) {
	objs, prev := loadedPopulation(b)
	b.ResetTimer()
	for range b.N {
		res := controlplane.Reconcile(controlplane.Config{}, objs, prev, time.Now())
		if len(res.Services) != 10001 {
			b.Fatal(len(res.Services))
		}
	}
}

// BenchmarkReloadOneChange10k: a long-running reader's reload after one
// Service of 10,000 changed.
func BenchmarkReloadOneChange10k(b *testing.B) {
	dir := b.TempDir()
	writePopulation(b, dir, 10000)
	c := NewCache()
	if _, err := Load(Options{Path: dir, Cache: c}); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "Service.bench.svc-00042.yaml")
	benchReloads(b, dir, c, func(i int) (string, []byte, int) {
		doc := fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-00042\n  namespace: bench\nspec:\n  ports:\n  - name: http\n    port: %d\n", 1000+i)
		return path, []byte(doc), 10001
	})
}

// benchReloads times b.N loads of path through c, each after change(i)
// (untimed) gave a file to write, its content and the number of Services
// the load must then give.
func benchReloads(b *testing.B, path string, c *Cache, change func(i int) (file string, content []byte, services int)) {
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		file, content, want := change(i)
		if err := os.WriteFile(file, content, 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		l, err := Load(Options{Path: path, Cache: c})
		if err != nil {
			b.Fatal(err)
		}
		if len(l.Errors) > 0 || len(l.Services) != want {
			b.Fatalf("%d services, want %d; errors %v", len(l.Services), want, l.Errors)
		}
	}
}

// BenchmarkReconcilerAgain10k: a Reconciler given the same 10,000 Services
// and their slices again.
func BenchmarkReconcilerAgain10k(b *testing.B) {
	objs, prev := loadedPopulation(b)
	var r controlplane.Reconciler
	r.Reconcile(controlplane.Config{}, objs, prev, time.Now())
	b.ResetTimer()
	for range b.N {
		res := r.Reconcile(controlplane.Config{}, objs, prev, time.Now())
		if len(res.Services) != 10001 {
			b.Fatal(len(res.Services))
		}
	}
}

// BenchmarkReloadOneFile10k: a long-running reader's reload of one
// manifest holding 10,000 Services and their slices (as the lab publishes
// a cluster) after one more Service was added to it.
func BenchmarkReloadOneFile10k(b *testing.B) {
	dir := b.TempDir()
	writePopulation(b, dir, 10000)
	var all []byte
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		all = append(append(all, "---\n"...), data...)
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, all, 0o644); err != nil {
		b.Fatal(err)
	}
	c := NewCache()
	if _, err := Load(Options{Path: path, Cache: c}); err != nil {
		b.Fatal(err)
	}
	benchReloads(b, path, c, func(i int) (string, []byte, int) {
		all = fmt.Appendf(all, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: added-%d\n  namespace: bench\nspec:\n  ports:\n  - port: 80\n", i)
		return path, all, 10002 + i
	})
}
