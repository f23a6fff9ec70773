package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

const manifest = `
apiVersion: svcnet.io/v1alpha1
kind: IPAddressPool
metadata:
  name: lab
  labels: {env: lab}
spec:
  addresses: ["172.26.236.180-172.26.236.199", "fd00::/120"]
  autoAssign: false
  mode: l2
  serviceAllocation:
    priority: 5
    namespaces: [default]
    namespaceSelectors:
    - matchLabels: {zone: east}
    serviceSelectors:
    - matchExpressions:
      - {key: tier, operator: In, values: [gold]}
`

func full() *IPAddressPool {
	no := false
	return &IPAddressPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: "svcnet.io/v1alpha1", Kind: "IPAddressPool"},
		ObjectMeta: metav1.ObjectMeta{Name: "lab", Labels: map[string]string{"env": "lab"}},
		Spec: IPAddressPoolSpec{
			Addresses:  []string{"172.26.236.180-172.26.236.199", "fd00::/120"},
			AutoAssign: &no,
			Mode:       "l2",
			ServiceAllocation: &ServiceAllocation{
				Priority:           5,
				Namespaces:         []string{"default"},
				NamespaceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"zone": "east"}}},
				ServiceSelectors: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold"}}}}},
			},
		},
	}
}

func TestSchemeDecode(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := serializer.NewCodecFactory(s).UniversalDeserializer().Decode([]byte(manifest), nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if *gvk != SchemeGroupVersion.WithKind(Kind) {
		t.Errorf("gvk %v", gvk)
	}
	p, ok := obj.(*IPAddressPool)
	if !ok {
		t.Fatalf("decoded a %T", obj)
	}
	if d := cmp.Diff(full(), p); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, o := range []runtime.Object{&IPAddressPool{}, &IPAddressPoolList{}} {
		if _, _, err := s.ObjectKinds(o); err != nil {
			t.Errorf("%T not registered: %v", o, err)
		}
	}
}

func TestDeepCopy(t *testing.T) {
	orig := full()
	c := orig.DeepCopyObject().(*IPAddressPool)
	if d := cmp.Diff(orig, c); d != "" {
		t.Fatalf("copy differs:\n%s", d)
	}
	// Change everything reachable from the copy; the original must not move.
	c.Labels["env"] = "x"
	c.Spec.Addresses[0] = "x"
	*c.Spec.AutoAssign = true
	c.Spec.ServiceAllocation.Namespaces[0] = "x"
	c.Spec.ServiceAllocation.NamespaceSelectors[0].MatchLabels["zone"] = "x"
	c.Spec.ServiceAllocation.ServiceSelectors[0].MatchExpressions[0].Values[0] = "x"
	if d := cmp.Diff(full(), orig); d != "" {
		t.Errorf("original changed through the copy:\n%s", d)
	}

	list := &IPAddressPoolList{Items: []IPAddressPool{*full()}}
	lc := list.DeepCopyObject().(*IPAddressPoolList)
	lc.Items[0].Spec.Addresses[1] = "x"
	if list.Items[0].Spec.Addresses[1] != "fd00::/120" {
		t.Error("list copy shares items")
	}
	var nilPool *IPAddressPool
	if nilPool.DeepCopy() != nil {
		t.Error("DeepCopy of nil is not nil")
	}
}

func TestFromUnstructured(t *testing.T) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(full())
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	got, err := FromUnstructured(u)
	if err != nil {
		t.Fatalf("FromUnstructured: %v", err)
	}
	if d := cmp.Diff(full(), got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}

	u.SetKind("L2Advertisement")
	if _, err := FromUnstructured(u); err == nil || !strings.Contains(err.Error(), "IPAddressPool lab: object is svcnet.io/v1alpha1, Kind=L2Advertisement") {
		t.Errorf("wrong kind: got %v", err)
	}
	u.SetKind(Kind)
	u.Object["spec"] = map[string]any{"addresses": "not-a-list"}
	if _, err := FromUnstructured(u); err == nil || !strings.HasPrefix(err.Error(), "IPAddressPool lab: ") {
		t.Errorf("bad spec: got %v", err)
	}
}

func TestStatusAdmitted(t *testing.T) {
	withCond := func(gen, observed int64, status metav1.ConditionStatus) *IPAddressPool {
		p := full()
		p.Generation = gen
		p.Status = &IPAddressPoolStatus{Conditions: []metav1.Condition{
			{Type: "Other", Status: metav1.ConditionTrue, ObservedGeneration: gen},
			{Type: ConditionAccepted, Status: status, ObservedGeneration: observed, Reason: ReasonAccepted},
		}}
		return p
	}
	for name, tc := range map[string]struct {
		p    *IPAddressPool
		want bool
	}{
		"accepted at its generation":   {withCond(3, 3, metav1.ConditionTrue), true},
		"accepted at an older one":     {withCond(4, 3, metav1.ConditionTrue), false},
		"refused":                      {withCond(3, 3, metav1.ConditionFalse), false},
		"no status":                    {full(), false},
		"nil":                          {nil, false},
		"status without the condition": {&IPAddressPool{Status: &IPAddressPoolStatus{}}, false},
	} {
		if got := StatusAdmitted(tc.p); got != tc.want {
			t.Errorf("%s: StatusAdmitted = %v, want %v", name, got, tc.want)
		}
	}

	// The status round-trips through the dynamic client's form and is deep-copied.
	p := withCond(2, 2, metav1.ConditionTrue)
	p.Status.Conditions[1].LastTransitionTime = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromUnstructured(&unstructured.Unstructured{Object: obj})
	if err != nil || !StatusAdmitted(got) {
		t.Fatalf("FromUnstructured: %v, admitted %v", err, StatusAdmitted(got))
	}
	if d := cmp.Diff(p, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	c := p.DeepCopy()
	c.Status.Conditions[1].Status = metav1.ConditionFalse
	if !StatusAdmitted(p) {
		t.Error("original changed through the copy's status")
	}
}
