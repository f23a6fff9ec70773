package pool

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	lbdeploy "github.com/svcnet/svcnet/deploy/lb"
)

func loadCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(lbdeploy.CRD, &crd.Object); err != nil {
		t.Fatalf("deploy/lb/crd.yaml: %v", err)
	}
	return crd
}

func nested(t *testing.T, obj map[string]any, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil || !ok {
		t.Fatalf("crd.yaml: %s: missing (%v)", strings.Join(path, "."), err)
	}
	return v
}

func TestCRDNames(t *testing.T) {
	crd := loadCRD(t).Object
	for path, want := range map[string]any{
		"apiVersion":            "apiextensions.k8s.io/v1",
		"kind":                  "CustomResourceDefinition",
		"metadata.name":         Resource + "." + Group,
		"spec.group":            Group,
		"spec.scope":            "Cluster",
		"spec.names.kind":       Kind,
		"spec.names.listKind":   Kind + "List",
		"spec.names.plural":     Resource,
		"spec.names.singular":   "ipaddresspool",
		"spec.names.shortNames": []any{"svcpool"},
	} {
		if got := nested(t, crd, strings.Split(path, ".")...); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	versions := nested(t, crd, "spec", "versions").([]any)
	if len(versions) != 1 {
		t.Fatalf("%d versions, want 1", len(versions))
	}
	v := versions[0].(map[string]any)
	if v["name"] != Version || v["served"] != true || v["storage"] != true {
		t.Errorf("version %v %v %v", v["name"], v["served"], v["storage"])
	}
	if st := nested(t, v, "subresources", "status"); !reflect.DeepEqual(st, map[string]any{}) {
		t.Errorf("subresources.status = %v, want {} (status written through /status only)", st)
	}
	var cols []string
	for _, c := range nested(t, v, "additionalPrinterColumns").([]any) {
		m := c.(map[string]any)
		cols = append(cols, m["name"].(string)+" "+m["type"].(string)+" "+m["jsonPath"].(string))
	}
	want := []string{"Mode string .spec.mode", "Addresses string .spec.addresses",
		"Auto-Assign boolean .spec.autoAssign", `Accepted string .status.conditions[?(@.type=="Accepted")].status`,
		"Age date .metadata.creationTimestamp"}
	if d := cmp.Diff(want, cols); d != "" {
		t.Errorf("printer columns (-want +got):\n%s", d)
	}
}

// TestCRDSchemaMatchesType walks the Go type and the openAPIV3Schema together:
// the same field names at every level, the same types, and the defaults and enum
// Parse assumes.
func TestCRDSchemaMatchesType(t *testing.T) {
	v := nested(t, loadCRD(t).Object, "spec", "versions").([]any)[0].(map[string]any)
	schema := nested(t, v, "schema", "openAPIV3Schema").(map[string]any)
	matchSchema(t, "IPAddressPool", reflect.TypeFor[IPAddressPool](), schema)

	spec := nested(t, schema, "properties", "spec", "properties").(map[string]any)
	if d := nested(t, spec, "autoAssign", "default"); d != true {
		t.Errorf("autoAssign default %v, want true", d)
	}
	if d := nested(t, spec, "mode", "default"); d != "l2" {
		t.Errorf("mode default %v, want l2", d)
	}
	if e := nested(t, spec, "mode", "enum"); !reflect.DeepEqual(e, []any{"l2", "node-ip"}) {
		t.Errorf("mode enum %v", e)
	}
	if req := nested(t, schema, "required"); !reflect.DeepEqual(req, []any{"spec"}) {
		t.Errorf("required %v", req)
	}
}

var (
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	timeType       = reflect.TypeFor[metav1.Time]()
)

func matchSchema(t *testing.T, path string, typ reflect.Type, s map[string]any) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == timeType {
		if s["type"] != "string" || s["format"] != "date-time" {
			t.Errorf("%s: schema type %v format %v, want a date-time string", path, s["type"], s["format"])
		}
		return
	}
	want := map[reflect.Kind]string{
		reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer", reflect.Int32: "integer",
		reflect.Int64: "integer", reflect.Slice: "array", reflect.Map: "object", reflect.Struct: "object",
	}[typ.Kind()]
	if s["type"] != want {
		t.Errorf("%s: schema type %v, Go %s wants %q", path, s["type"], typ, want)
		return
	}
	switch typ.Kind() {
	case reflect.Slice:
		items, _ := s["items"].(map[string]any)
		matchSchema(t, path+"[]", typ.Elem(), items)
	case reflect.Map:
		ap, _ := s["additionalProperties"].(map[string]any)
		matchSchema(t, path+"{}", typ.Elem(), ap)
	case reflect.Struct:
		if typ == objectMetaType {
			return // the apiserver owns metadata's schema
		}
		props, _ := s["properties"].(map[string]any)
		fields := jsonFields(typ)
		var got, names []string
		for name := range props {
			got = append(got, name)
		}
		for name := range fields {
			names = append(names, name)
		}
		slices.Sort(got)
		slices.Sort(names)
		if d := cmp.Diff(names, got); d != "" {
			t.Errorf("%s: properties (-Go +schema):\n%s", path, d)
		}
		for name, f := range fields {
			if p, ok := props[name].(map[string]any); ok {
				matchSchema(t, path+"."+name, f, p)
			}
		}
	}
}

// jsonFields returns the JSON field names of a struct and their types, with
// inline (embedded) structs flattened.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && f.Anonymous && strings.Contains(opts, "inline") {
			for n, ft := range jsonFields(f.Type) {
				out[n] = ft
			}
			continue
		}
		out[name] = f.Type
	}
	return out
}
