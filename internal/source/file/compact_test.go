package file

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const compactServices = `apiVersion: v1
kind: Service
metadata: {name: a, namespace: shop, labels: {app: a, tier: web}}
spec:
  selector: {app: a, tier: web}
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10]
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  internalTrafficPolicy: Cluster
  ports: [{name: http, protocol: TCP, port: 80, appProtocol: http}]
---
{"apiVersion": "v1", "kind": "Service",
 "metadata": {"name": "b", "namespace": "shop", "labels": {"app": "b"}},
 "spec": {"type": "NodePort", "selector": {"app": "other"}, "clusterIP": "10.96.0.11", "clusterIPs": ["10.96.0.11"],
  "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster", "externalTrafficPolicy": "Local",
  "ports": [{"name": "http", "protocol": "TCP", "port": 80}]}}
`

// TestCompactSharesWithoutChanging: decoded Services are what the
// universal deserializer gives, from text and from the decode cache's
// protobuf alike, and share their repeated strings, within one and across
// Services, and their selector map with their labels when the two are
// equal.
func TestCompactSharesWithoutChanging(t *testing.T) {
	objs, errs := decodeAll("s.yaml", []byte(compactServices))
	if len(errs) != 0 || len(objs) != 2 {
		t.Fatalf("decoded %d objects, errors %v", len(objs), errs)
	}
	docs, err := splitDocuments([]byte(compactServices))
	if err != nil {
		t.Fatal(err)
	}
	var svcs []*corev1.Service
	for i, o := range objs {
		svc := o.Obj.(*corev1.Service)
		want := deserialize(t, docs[i])
		if diff := cmp.Diff(want, runtime.Object(svc)); diff != "" {
			t.Errorf("Service %s differs from the deserializer's (-want +got):\n%s", svc.Name, diff)
		}
		p, ok := encodeExactly(svc)
		if !ok {
			t.Fatalf("Service %s: no exact protobuf encoding", svc.Name)
		}
		back, err := decodeProto(p)
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc, back.(*corev1.Service))
	}

	a, aCached, b := svcs[0], svcs[1], svcs[2]
	for _, s := range []*corev1.Service{a, aCached} {
		if !sameMap(s.Labels, s.Spec.Selector) {
			t.Errorf("Service a (%p): the selector is not the labels map, equal to it", s)
		}
	}
	if sameMap(b.Labels, b.Spec.Selector) {
		t.Errorf("Service b: the selector is the labels map, which differs from it")
	}
	if !sameString(a.Spec.ClusterIPs[0], a.Spec.ClusterIP) {
		t.Errorf("Service a: clusterIPs[0] is a copy of clusterIP")
	}
	if !sameString(*a.Spec.Ports[0].AppProtocol, a.Spec.Ports[0].Name) {
		t.Errorf("Service a: the appProtocol http is a copy of the port name http")
	}
	for _, s := range svcs[1:] {
		shared := map[string][2]string{
			"namespace":             {a.Namespace, s.Namespace},
			"label key":             {key(a.Labels, "app"), key(s.Labels, "app")},
			"selector key":          {key(a.Labels, "tier"), key(s.Spec.Selector, "tier")},
			"port name":             {a.Spec.Ports[0].Name, s.Spec.Ports[0].Name},
			"protocol":              {string(a.Spec.Ports[0].Protocol), string(s.Spec.Ports[0].Protocol)},
			"IP family":             {string(a.Spec.IPFamilies[0]), string(s.Spec.IPFamilies[0])},
			"ipFamilyPolicy":        {string(*a.Spec.IPFamilyPolicy), string(*s.Spec.IPFamilyPolicy)},
			"internalTrafficPolicy": {string(*a.Spec.InternalTrafficPolicy), string(*s.Spec.InternalTrafficPolicy)},
		}
		if s.Name == "b" {
			delete(shared, "selector key")
		}
		for what, v := range shared {
			if v[0] != v[1] || !sameString(v[0], v[1]) {
				t.Errorf("Service %s (%p): its %s %q is not Service a's %q", s.Name, s, what, v[1], v[0])
			}
		}
	}
	if b2 := svcs[3]; !sameString(string(b.Spec.Type), string(b2.Spec.Type)) ||
		!sameString(string(b.Spec.ExternalTrafficPolicy), string(b2.Spec.ExternalTrafficPolicy)) {
		t.Errorf("Service b: its type or externalTrafficPolicy is not shared with its copy from the cache")
	}
}

// TestOneShotLoadLeavesSharedMaps: a one-shot load lets the control plane
// default and allocate the decoded Services in place; the labels and
// selector they share come out as written.
func TestOneShotLoadLeavesSharedMaps(t *testing.T) {
	dir := copySeed(t)
	writeFile(t, filepath.Join(dir, "compact.yaml"), compactServices)
	l, err := Load(Options{Path: dir, Now: testNow, ResultOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]map[string]string{
		"a": {{"app": "a", "tier": "web"}, {"app": "a", "tier": "web"}},
		"b": {{"app": "b"}, {"app": "other"}},
	}
	found := 0
	for _, s := range l.API.Services {
		w, ok := want[s.Name]
		if !ok || s.Namespace != "shop" {
			continue
		}
		found++
		if got := [2]map[string]string{s.Labels, s.Spec.Selector}; !reflect.DeepEqual(got, w) {
			t.Errorf("Service %s: labels and selector %v, want %v", s.Name, got, w)
		}
	}
	if found != len(want) {
		t.Fatalf("the result holds %d of the Services a and b", found)
	}
}

func deserialize(t *testing.T, doc []byte) runtime.Object {
	t.Helper()
	raw := bytes.TrimSpace(doc)
	raw, err := utilyaml.ToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	obj, _, err := codecs.UniversalDeserializer().Decode(raw, &gvk, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// key is m's stored copy of the key k.
func key(m map[string]string, k string) string {
	for s := range m {
		if s == k {
			return s
		}
	}
	return ""
}
