package controlplane

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

// hostileNames are names that must never reach a path: each is refused for
// every kind, with the apiserver's message.
var hostileNames = []struct{ name, want string }{
	{"", "metadata.name: Required value"},
	{"..", "metadata.name: Invalid value"},
	{".", "metadata.name: Invalid value"},
	{"../../../../tmp/ESCAPED", "metadata.name: Invalid value"},
	{"a/b", "metadata.name: Invalid value"},
	{"a\x00b", "metadata.name: Invalid value"},
	{"под", "metadata.name: Invalid value"},
	{"Upper", "metadata.name: Invalid value"},
	{"a b", "metadata.name: Invalid value"},
	{strings.Repeat("a", 300), "must be no more than"},
}

func TestValidateNameRefusesHostileNames(t *testing.T) {
	for kind := range nameRules {
		ns := "default"
		if n, _ := Namespaced(kind); !n {
			ns = ""
		}
		for _, tc := range hostileNames {
			err := ValidateName(kind, ns, tc.name)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ValidateName(%s, %q, %q) = %v, want an error containing %q", kind, ns, tc.name, err, tc.want)
			}
			var oe *ObjectError
			if !errors.As(err, &oe) || oe.Kind != kind {
				t.Errorf("ValidateName(%s, %q): %v is not an ObjectError of its kind", kind, tc.name, err)
			}
		}
	}
}

func TestValidateNameRules(t *testing.T) {
	long63, long64 := strings.Repeat("a", 63), strings.Repeat("a", 64)
	long253 := strings.Repeat("a.", 126) + "a"
	cases := []struct {
		kind, ns, name string
		ok             bool
	}{
		{"Service", "default", "web", true},
		{"Service", "default", "1web", true}, // a DNS-1123 label may start with a digit
		{"Service", "default", "web.x", false},
		{"Service", "default", long63, true},
		{"Service", "default", long64, false},
		{"Pod", "default", "web-0.x", true},
		{"Pod", "default", long253, true},
		{"Pod", "default", long253 + "a", false},
		{"Pod", "pod.default", "b", false}, // a namespace is a label: no dots
		{"Pod", "c.a", "b", false},
		{"Pod", long63, "b", true},
		{"Pod", long64, "b", false},
		{"Pod", "", "b", false}, // namespaced: a namespace is required
		{"EndpointSlice", "default", "web-abc.1", true},
		{"Endpoints", "default", "web", true},
		{"Namespace", "", "kube-system", true},
		{"Namespace", "", "a.b", false},
		{"Namespace", "default", "x", false}, // cluster-scoped: no namespace
		{"Node", "", "node1.example", true},
		{"IPAddressPool", "", "lab", true},
		{"IPAddressPool", "", "../x", false},
		{"Secret", "default", "x", false},
	}
	for _, tc := range cases {
		err := ValidateName(tc.kind, tc.ns, tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateName(%s, %q, %q) = %v, want ok=%v", tc.kind, tc.ns, tc.name, err, tc.ok)
		}
	}
	if err := ValidateName("Secret", "default", "x"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("ValidateName(Secret) = %v, want ErrUnknownKind", err)
	}
}

func TestValidateObject(t *testing.T) {
	meta := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	cases := []struct {
		desc string
		obj  Object
		want string // "" for valid
	}{
		{"pod", Object{"p.yaml#1", &corev1.Pod{ObjectMeta: meta("", "web-0")}}, ""},
		{"pod with a unicode name", Object{"p.yaml#1", &corev1.Pod{ObjectMeta: meta("", "под")}},
			`p.yaml#1: Pod default/под: metadata.name: Invalid value: "под"`},
		{"pod in a namespace with a dot", Object{"p.yaml#2", &corev1.Pod{ObjectMeta: meta("pod.default", "b")}},
			`p.yaml#2: Pod pod.default/b: metadata.namespace: Invalid value: "pod.default"`},
		{"pod with a bad container port", Object{"p.yaml#3", &corev1.Pod{ObjectMeta: meta("", "x"),
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 70000}}}}}}},
			"spec.containers[0].ports[0].containerPort: Invalid value: 70000"},
		{"service", Object{"s.yaml", &corev1.Service{ObjectMeta: meta("", "web"),
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}}, ""},
		{"service with a path for a name", Object{"s.yaml", &corev1.Service{ObjectMeta: meta("", "../../../../tmp/ESCAPED"),
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}}, `s.yaml: Service default/../../../../tmp/ESCAPED: metadata.name: Invalid value`},
		{"namespace", Object{"n.yaml", &corev1.Namespace{ObjectMeta: meta("", "a.b")}}, "metadata.name: Invalid value"},
		{"pool", Object{"pool.yaml", &pool.IPAddressPool{ObjectMeta: meta("", "lab"),
			Spec: pool.IPAddressPoolSpec{Addresses: []string{"10.0.0.0/30"}}}}, ""},
		{"pool with a bad name", Object{"pool.yaml", &pool.IPAddressPool{ObjectMeta: meta("", "x/y"),
			Spec: pool.IPAddressPoolSpec{Addresses: []string{"10.0.0.0/30"}}}}, "pool.yaml: IPAddressPool x/y: metadata.name: Invalid value"},
		{"unknown kind", Object{"c.yaml", &corev1.ConfigMap{ObjectMeta: meta("", "x")}}, "unknown kind"},
	}
	for _, tc := range cases {
		obj := tc.obj.Obj.DeepCopyObject()
		err := Validate(tc.obj)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate = %v, want nil", tc.desc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate = %v, want an error containing %q", tc.desc, err, tc.want)
		}
		if !equality.Semantic.DeepEqual(obj, tc.obj.Obj) {
			t.Errorf("%s: Validate changed its input", tc.desc)
		}
	}
}
