package pool

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured converts an object read through a dynamic client or informer.
// Its apiVersion and kind must be svcnet.io/v1alpha1 IPAddressPool; fields the
// type does not have are ignored. It does not validate the spec (Parse does).
func FromUnstructured(u *unstructured.Unstructured) (*IPAddressPool, error) {
	if u == nil {
		return nil, fmt.Errorf("IPAddressPool: nil object")
	}
	if gvk := u.GroupVersionKind(); gvk != SchemeGroupVersion.WithKind(Kind) {
		return nil, fmt.Errorf("IPAddressPool %s: object is %s, not %s", u.GetName(), gvk, SchemeGroupVersion.WithKind(Kind))
	}
	p := &IPAddressPool{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), p); err != nil {
		return nil, fmt.Errorf("IPAddressPool %s: %w", u.GetName(), err)
	}
	return p, nil
}
