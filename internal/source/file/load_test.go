package file

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/model"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copySeed(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "../../../examples/packet-path"
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, e.Name()), string(b))
	}
	return dir
}

func findService(l *Loaded, name string) *model.Service {
	for _, s := range l.Services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

var (
	serviceRange = netip.MustParsePrefix("10.96.0.0/12")
	testNow      = func() time.Time { return time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC) }
)

func TestLoadPacketPath(t *testing.T) {
	dir := copySeed(t)
	l, err := Load(Options{Path: dir, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Errors) != 0 {
		t.Fatalf("errors: %v", l.Errors)
	}
	s := findService(l, "my-nginx")
	if s == nil {
		t.Fatal("my-nginx not loaded")
	}
	if len(s.ClusterIPs) != 1 || !serviceRange.Contains(s.ClusterIPs[0]) {
		t.Fatalf("clusterIPs %v not in %s", s.ClusterIPs, serviceRange)
	}
	if p := s.Ports[0]; p.Port != 80 || p.NodePort < 30000 || p.NodePort > 32767 || p.TargetPortName != "http" {
		t.Fatalf("port %+v", p)
	}
	var eps []string
	for _, sl := range l.EndpointSlices {
		if sl.Service != "my-nginx" {
			continue
		}
		for _, e := range model.EndpointsFor([]*model.EndpointSlice{sl}, "", model.ProtocolTCP) {
			eps = append(eps, fmt.Sprintf("%s:%d@%s", e.Addr, e.Port, e.Endpoint.NodeName))
		}
	}
	if got := strings.Join(eps, ","); got != "192.168.2.2:80@node2,192.168.3.2:80@node3" {
		t.Fatalf("my-nginx endpoints = %s", got)
	}
	if findService(l, "kubernetes") == nil {
		t.Fatal("default/kubernetes not created by the control plane")
	}
	if len(l.Nodes) != 3 || len(l.Pods) != 2 {
		t.Fatalf("nodes=%d pods=%d", len(l.Nodes), len(l.Pods))
	}
	if _, err := os.Stat(filepath.Join(dir, ".svcnet-state.json")); err != nil {
		t.Fatalf("state not persisted: %v", err)
	}
}

func TestAllocationsAreStableAcrossReloads(t *testing.T) {
	dir := copySeed(t)
	first, err := Load(Options{Path: dir, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	// Add Services that, in a fresh run, could compete for the same addresses.
	var extra strings.Builder
	for _, n := range []string{"a", "b", "c", "zz"} {
		extra.WriteString("---\napiVersion: v1\nkind: Service\nmetadata: {name: " + n + "}\nspec: {type: NodePort, ports: [{port: 80}]}\n")
	}
	writeFile(t, filepath.Join(dir, "more.yaml"), extra.String())
	second, err := Load(Options{Path: dir, Now: func() time.Time { return testNow().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	a, b := findService(first, "my-nginx"), findService(second, "my-nginx")
	if a.ClusterIPs[0] != b.ClusterIPs[0] || a.Ports[0].NodePort != b.Ports[0].NodePort {
		t.Fatalf("my-nginx moved: %v:%d -> %v:%d", a.ClusterIPs, a.Ports[0].NodePort, b.ClusterIPs, b.Ports[0].NodePort)
	}
	// A restart (a new Load from the state file alone) gives the same again, and the
	// creation time is the first one.
	third, err := Load(Options{Path: dir, Now: func() time.Time { return testNow().Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range second.Services {
		o := findService(third, s.Name)
		if o == nil || o.ClusterIPs[0] != s.ClusterIPs[0] || o.Ports[0].NodePort != s.Ports[0].NodePort {
			t.Fatalf("%s moved across restart", s.Name)
		}
	}
	for _, s := range third.API.Services {
		if s.Name == "my-nginx" && !s.CreationTimestamp.Time.Equal(testNow()) {
			t.Fatalf("my-nginx creationTimestamp = %v, want the first load's %v", s.CreationTimestamp, testNow())
		}
	}
}

func TestInvalidServiceIsReportedAndOthersServed(t *testing.T) {
	dir := copySeed(t)
	writeFile(t, filepath.Join(dir, "bad.yaml"), `apiVersion: v1
kind: Service
metadata: {name: good}
spec: {ports: [{port: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: bad}
spec: {ports: [{port: 70000}]}
`)
	l, err := Load(Options{Path: dir, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Errors) != 1 {
		t.Fatalf("errors = %v, want 1", l.Errors)
	}
	msg := l.Errors[0].Error()
	for _, part := range []string{filepath.Join(dir, "bad.yaml") + "#2", "Service default/bad", "spec.ports[0].port", "70000", "between 1 and 65535"} {
		if !strings.Contains(msg, part) {
			t.Errorf("error %q does not name %q", msg, part)
		}
	}
	if findService(l, "good") == nil || findService(l, "my-nginx") == nil || findService(l, "bad") != nil {
		t.Fatalf("valid Services not all served, or the bad one was")
	}
}

func TestReadOnlyAndStatePath(t *testing.T) {
	dir := copySeed(t)
	if _, err := Load(Options{Path: dir, ReadOnly: true, Config: controlplane.Config{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(StatePathFor(dir)); !os.IsNotExist(err) {
		t.Fatalf("read-only load wrote state (%v)", err)
	}
	f := filepath.Join(dir, "my-nginx.yaml")
	if got, want := StatePathFor(f), filepath.Join(dir, ".my-nginx.yaml.svcnet-state.json"); got != want {
		t.Fatalf("StatePathFor(file) = %s, want %s", got, want)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if os.Geteuid() != 0 { // root writes anyway
		if _, err := Load(Options{Path: dir}); err == nil || !strings.Contains(err.Error(), ErrStateWrite.Error()) {
			t.Fatalf("unwritable state: err = %v, want ErrStateWrite", err)
		}
	}
}

// TestNodeDeletionState: a Node's taints and deletion timestamp in a
// manifest reach the model (svcnet proxy's /healthz reads them).
func TestNodeDeletionState(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "nodes.yaml"), `apiVersion: v1
kind: Node
metadata: {name: node1}
spec:
  taints: [{key: ToBeDeletedByClusterAutoscaler, value: "1700000000", effect: NoSchedule}]
---
apiVersion: v1
kind: Node
metadata: {name: node2, deletionTimestamp: "2026-11-21T08:00:00Z", finalizers: [example.com/hold]}
`)
	l, err := Load(Options{Path: dir, Now: testNow})
	if err != nil || len(l.Errors) != 0 {
		t.Fatalf("load: %v %v", err, l.Errors)
	}
	got := map[string]string{}
	for _, n := range l.Nodes {
		got[n.Name] = fmt.Sprintf("taints %q terminating %v", n.TaintKeys, n.Terminating)
	}
	want := map[string]string{
		"node1": `taints ["ToBeDeletedByClusterAutoscaler"] terminating false`,
		"node2": `taints [] terminating true`,
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s, want %s", name, got[name], w)
		}
	}
}
