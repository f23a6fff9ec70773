package file

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// typeMetaCases are JSON documents whose type a sniff reads, or must leave
// to encoding/json.
var typeMetaCases = []struct {
	doc              string
	apiVersion, kind string
	ok               bool
}{
	{`{"apiVersion":"v1","kind":"Service"}`, "v1", "Service", true},
	{` { "kind" : "Pod" , "metadata":{"name":"p","labels":{"a":"}"}}, "apiVersion":"v1" } `, "v1", "Pod", true},
	{`{"spec":{"ports":[{"port":80},[1,2,{"x":"\"kind\":\"Node\""}]]},"n":-1.5e3,"t":true,"z":null,"apiVersion":"v1","kind":"Namespace"}`, "v1", "Namespace", true},
	{`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","endpoints":[]}`, "discovery.k8s.io/v1", "EndpointSlice", true},
	{`{}`, "", "", false},
	{`{"kind":"Service"}`, "", "", false},
	{`{"apiVersion":"v1"}`, "", "", false},
	{`{"apiVersion":"v1","kind":"Service","kind":"Pod"}`, "", "", false},
	{`{"apiVersion":"v1","apiVersion":"v2","kind":"Pod"}`, "", "", false},
	{`{"apiVersion":"v1","kind":"Ser\u0076ice"}`, "", "", false},
	{`{"apiVersion":"v1","ki\u006ed":"Service"}`, "", "", false},
	{`{"apiVersion":"v1","kind":5}`, "", "", false},
	{`{"apiVersion":"v1","kind":"Service"`, "", "", false},
	{`{"apiVersion":"v1","kind":"Service",}`, "", "", false},
	{`{"apiVersion":"v1" "kind":"Service"}`, "", "", false},
	{`{"apiVersion":"v1","kind":"Service","x":"unclosed}`, "", "", false},
	{`["apiVersion","kind"]`, "", "", false},
	{`"kind"`, "", "", false},
	{``, "", "", false},
}

func TestSniffTypeMeta(t *testing.T) {
	for _, c := range typeMetaCases {
		v, k, ok := sniffTypeMeta([]byte(c.doc))
		if v != c.apiVersion || k != c.kind || ok != c.ok {
			t.Errorf("sniffTypeMeta(%s) = %q, %q, %v; want %q, %q, %v", c.doc, v, k, ok, c.apiVersion, c.kind, c.ok)
		}
	}
}

// decodeDocCorpus are documents of every outcome: each known kind, unknown
// and duplicate fields, fields in the wrong case, bad values and syntax,
// Lists, unknown kinds.
var decodeDocCorpus = []string{
	`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"n","labels":{"app":"web"}},"spec":{"selector":{},"ports":[{"name":"http","port":80,"targetPort":"http","protocol":"TCP"}],"clusterIP":"10.96.0.10","type":"LoadBalancer"}}`,
	`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a-1","labels":{"kubernetes.io/service-name":"a"}},"addressType":"IPv4","ports":[{"name":"http","port":8080}],"endpoints":[{"addresses":["192.168.0.1"],"conditions":{"ready":true},"nodeName":"n1"}]}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"web"}},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"i","ports":[{"name":"http","containerPort":8080}],"resources":{"limits":{"cpu":"100m"}}}]},"status":{"podIP":"192.168.0.1","phase":"Running"}}`,
	`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"spec":{"podCIDR":"192.168.0.0/24"},"status":{"addresses":[{"type":"InternalIP","address":"172.18.0.2"}]}}`,
	`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","creationTimestamp":"2026-01-02T03:04:05Z"}}`,
	`{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"e"},"subsets":[{"addresses":[{"ip":"192.168.0.2"}],"ports":[{"port":80}]}]}`,
	`{"apiVersion":"svcnet.dev/v1alpha1","kind":"IPAddressPool","metadata":{"name":"pool"},"spec":{"addresses":["172.18.255.200-172.18.255.250"]}}`,
	`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"spec":{"portz":[]}}`,
	`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","name":"b"}}`,
	`{"apiVersion":"v1","kind":"Service","Kind":"Pod","metadata":{"name":"a"}}`,
	`{"apiVersion":"v1","kind":"Service","metadata":{"Name":"a"}}`,
	`{"apiVersion":"v1","kind":"Service","spec":{"ports":[{"port":"eighty"}]}}`,
	`{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"lots"}}}]}}`,
	`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}} trailing`,
	`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"`,
	`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"}},{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}]}`,
	`{"apiVersion":"v1","kind":"ServiceList","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}]}`,
	`{"apiVersion":"v1","kind":"ServiceList"}`,
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}`,
	`{"apiVersion":"v1","kind":"","metadata":{"name":"d"}}`,
	`{"apiVersion":"v1","kind":"Ser\u0076ice","metadata":{"name":"escaped"}}`,
	`{"apiVersion":"v1","kind":"Service","items":5}`,
	`{"apiVersion":"v2","kind":"Service"}`,
	`[1,2]`,
	`{"kind":"Service"}`,
}

// TestDecodeDocMatchesDeserializer: the sniffing decoder gives what
// encoding/json and the universal deserializer give, object for object and
// error for error.
func TestDecodeDocMatchesDeserializer(t *testing.T) {
	for _, doc := range decodeDocCorpus {
		checkDecodeDocMatches(t, []byte(doc))
	}
}

// FuzzDecodeDoc: on any input the sniffing decoder agrees with the
// deserializer's path.
func FuzzDecodeDoc(f *testing.F) {
	for _, doc := range decodeDocCorpus {
		f.Add([]byte(doc))
	}
	for _, c := range typeMetaCases {
		f.Add([]byte(c.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkDecodeDocMatches(t, doc)
	})
}

func checkDecodeDocMatches(t *testing.T, doc []byte) {
	t.Helper()
	objs, errs := decodeDoc("m.json#1", doc)
	wantObjs, wantErrs := decodeDocSlowly("m.json#1", doc)
	if !reflect.DeepEqual(objs, wantObjs) {
		t.Errorf("%s:\n objects %v\n    want %v", doc, objs, wantObjs)
	}
	if got, want := fmt.Sprint(errs), fmt.Sprint(wantErrs); got != want {
		t.Errorf("%s:\n errors %s\n   want %s", doc, got, want)
	}
}

// BenchmarkDecodeJSON: decoding 10,000 Services and their EndpointSlices
// as the lab publishes them (a JSON document each), with the type sniffed
// and through encoding/json and the universal deserializer.
func BenchmarkDecodeJSON(b *testing.B) {
	var docs [][]byte
	for i := range 10000 {
		docs = append(docs,
			fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc-%05d","namespace":"bench"},"spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":8080}],"clusterIP":"10.96.%d.%d"}}`, i, i/250, i%250+2),
			fmt.Appendf(nil, `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"svc-%05d-bench","namespace":"bench","labels":{"endpointslice.kubernetes.io/managed-by":"svcnet-bench","kubernetes.io/service-name":"svc-%05d"}},"addressType":"IPv4","endpoints":[{"addresses":["192.168.%d.%d"],"conditions":{"ready":true}},{"addresses":["192.168.%d.%d"],"conditions":{"ready":true}}],"ports":[{"name":"http","protocol":"TCP","port":8080}]}`, i, i, i/127, 2*(i%127)+1, i/127, 2*(i%127)+2))
	}
	for _, c := range []struct {
		name   string
		decode func(string, []byte) ([]controlplane.Object, []error)
	}{{"sniffed", decodeDoc}, {"deserializer", decodeDocSlowly}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				for _, d := range docs {
					if _, errs := c.decode("m.json#1", d); len(errs) > 0 {
						b.Fatal(errs)
					}
				}
			}
		})
	}
}
