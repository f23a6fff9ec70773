package kubecluster

import (
	"bytes"
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// CRDResource is apiextensions.k8s.io/v1 customresourcedefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the CustomResourceDefinition in manifest (YAML or JSON; one
// that already exists is left as it is) and waits, bounded by limit, until it is
// Established. It returns the CRD as given. The error names the CRD and, on a
// timeout, its last conditions.
func InstallCRD(ctx context.Context, dyn dynamic.Interface, manifest []byte, limit time.Duration) (*unstructured.Unstructured, error) {
	var obj map[string]any
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096).Decode(&obj); err != nil {
		return nil, fmt.Errorf("decode CustomResourceDefinition: %w", err)
	}
	crd := &unstructured.Unstructured{Object: obj}
	name := crd.GetName()
	if _, err := dyn.Resource(CRDResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("CustomResourceDefinition %s: %w", name, err)
	}
	deadline := time.Now().Add(limit)
	for {
		u, err := dyn.Resource(CRDResource).Get(ctx, name, metav1.GetOptions{})
		var conds []any
		if err == nil {
			conds, _, _ = unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return crd, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("CustomResourceDefinition %s not Established after %s (conditions %v, last error %v)", name, limit, conds, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
