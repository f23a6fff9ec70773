package file

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
)

func TestDocKind(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		kind string
		ok   bool
	}{
		{"apiVersion: v1\nkind: Service\nmetadata: {name: a}\n", "Service", true},
		{"kind: \"Pod\"  # a comment\napiVersion: v1\n", "Pod", true},
		{"kind: 'Node'\n", "Node", true},
		{"metadata:\n  kind: Pod\nkind: Service\n", "Service", true}, // nested: indented
		{"spec:\n  description: |\n    kind: Pod\nkind: Service\n", "Service", true},
		{"kind: Service\nkind: Pod\n", "", false}, // repeated: the decoder says what is wrong
		{"metadata: {name: a}\n", "", false},
		{"{kind: Service, apiVersion: v1}\n", "", false}, // flow style: not JSON
		{"kind: {a: b}\n", "", false},
		{`{"apiVersion":"v1","kind":"EndpointSlice","metadata":{"name":"a"}}`, "EndpointSlice", true},
		{` {"metadata":{"kind":"Pod"},"kind":"Service","apiVersion":"v1"}`, "Service", true},
		{`{"kind":"Service"}`, "", false}, // no apiVersion: the decoder says so
		{`{"kind":"Service","kind":"Pod"}`, "", false},
		{`{"kind":"Serv\u0069ce"}`, "", false},
	} {
		kind, ok := docKind([]byte(tc.doc))
		if kind != tc.kind || ok != tc.ok {
			t.Errorf("docKind(%q) = %q, %v; want %q, %v", tc.doc, kind, ok, tc.kind, tc.ok)
		}
	}
	f := newKindFilter(KindsFor("Service"))
	for doc, skip := range map[string]bool{
		"kind: Pod\n":           true,
		"kind: EndpointSlice\n": true,
		"kind: Service\n":       false,
		"kind: Node\n":          false,
		"kind: Namespace\n":     false,
		"kind: IPAddressPool\n": false,
		"kind: List\n":          false, // its items may be of any kind
		"kind: PodList\n":       false,
		"kind: Pod\nkind: Pod":  false,
	} {
		if got := f.skips([]byte(doc)); got != skip {
			t.Errorf("skips(%q) = %v, want %v", doc, got, skip)
		}
	}
	if KindsFor("Service", "") != nil || KindsFor() != nil {
		t.Error("KindsFor of a kind it does not know, or of none: want every kind (nil)")
	}
}

// badSlice and badPod are invalid objects of kinds a reader of Services
// does not read.
const (
	badSlice = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: bad}\naddressType: IPv4\nendpoints: [{addresses: [not-an-ip]}]\n"
	badPod   = "apiVersion: v1\nkind: Pod\nmetadata: {name: BAD}\nspec: {containers: [{name: c, image: i}]}\n"
	nodePool = "apiVersion: svcnet.io/v1alpha1\nkind: IPAddressPool\nmetadata: {name: lab}\nspec: {mode: node-ip, addresses: []}\n"
)

// A load of some kinds gives the Services a load of every kind gives,
// leaves the other kinds' errors to their readers, keeps what the state
// held of the kinds it did not read, and reads every kind after all where
// a pool of mode node-ip makes Services depend on EndpointSlices.
func TestLoadKinds(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool string // what pool.yaml holds
		all  bool   // the load must read every kind
	}{
		{"address pool", labPool, false},
		{"node-ip pool", nodePool, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copySeed(t)
			writeFile(t, filepath.Join(dir, "pool.yaml"), tc.pool)
			writeFile(t, filepath.Join(dir, "bad.yaml"), badSlice+"---\n"+badPod)
			writeFile(t, filepath.Join(dir, "plain.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: plain}\nspec:\n  selector: {app: x}\n  ports: [{port: 81}]\n")
			// A first load of every kind persists the state (creation
			// times of every kind); the loads compared read it.
			if _, err := Load(Options{Path: dir, Now: testNow}); err != nil {
				t.Fatal(err)
			}
			statePath := StatePathFor(dir)
			before := readStateFile(t, statePath)
			full, err := Load(Options{Path: dir, Now: testNow, ReadOnly: true, ResultOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			some, err := Load(Options{Path: dir, Now: testNow, ResultOnly: true, Kinds: KindsFor("Service")})
			if err != nil {
				t.Fatal(err)
			}
			if len(full.API.Services) < 3 || !reflect.DeepEqual(some.API.Services, full.API.Services) {
				t.Fatalf("Services differ:\nsome kinds: %v\nevery kind: %v", names(some.API.Services), names(full.API.Services))
			}
			if !reflect.DeepEqual(some.API.Pools, full.API.Pools) || !reflect.DeepEqual(some.API.Nodes, full.API.Nodes) {
				t.Fatal("pools or nodes differ")
			}
			if got, want := len(some.API.Pods) > 0, tc.all; got != want {
				t.Errorf("Pods read: %v, want %v", got, want)
			}
			var errKinds []string
			for _, e := range some.Errors {
				errKinds = append(errKinds, e.Error())
			}
			if tc.all != (len(some.Errors) == len(full.Errors)) || (!tc.all && len(some.Errors) != 0) {
				t.Errorf("errors: %q (every kind: %d)", errKinds, len(full.Errors))
			}
			after := readStateFile(t, statePath)
			if !reflect.DeepEqual(after, before) {
				t.Errorf("the state changed:\nbefore %v\nafter  %v", before, after)
			}
			if !slices.ContainsFunc(keys(after.Created), func(k string) bool { return strings.HasPrefix(k, "EndpointSlice/") }) ||
				!slices.ContainsFunc(keys(after.Created), func(k string) bool { return strings.HasPrefix(k, "Pod/") }) {
				t.Errorf("the state lost the EndpointSlices' or Pods' creation times: %v", keys(after.Created))
			}
			if _, err := os.Stat(DecodedPathFor(dir)); err != nil {
				t.Fatalf("decode cache: %v", err)
			}
		})
	}
	// The decode cache a load of some kinds writes keeps what it held of
	// the documents skipped.
	dir := copySeed(t)
	writeFile(t, filepath.Join(dir, "bad.yaml"), badSlice+"---\n"+badPod)
	if _, err := Load(Options{Path: dir, Now: testNow}); err != nil {
		t.Fatal(err)
	}
	held := len(openDiskCache(DecodedPathFor(dir)).have)
	var more strings.Builder
	for i := range 10 { // enough new documents for the cache to be written again
		fmt.Fprintf(&more, "---\napiVersion: v1\nkind: Service\nmetadata: {name: more-%d}\nspec: {ports: [{port: 80}]}\n", i)
	}
	writeFile(t, filepath.Join(dir, "more.yaml"), more.String())
	if _, err := Load(Options{Path: dir, Now: testNow, ResultOnly: true, Kinds: KindsFor("Service")}); err != nil {
		t.Fatal(err)
	}
	if got := len(openDiskCache(DecodedPathFor(dir)).have); got != held+10 {
		t.Errorf("decode cache: %d documents after a load of Services, want %d (%d before, 10 Services more)", got, held+10, held)
	}
	if _, err := Load(Options{Path: t.TempDir(), Cache: NewCache(), Kinds: KindsFor("Service")}); err == nil {
		t.Error("a load of some kinds with a Cache: no error")
	}
}

func names(list []*corev1.Service) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

func readStateFile(t *testing.T, path string) controlplane.State {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st controlplane.State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
