package pool

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	lbdeploy "github.com/svcnet/svcnet/deploy/lb"
	"github.com/svcnet/svcnet/internal/kubecluster"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lb/alloc"
)

// TestCRDOnAPIServer (kube tier) installs deploy/lb/crd.yaml in a real
// kube-apiserver and checks that it takes the pools Parse takes, fills in the
// defaults Parse assumes, and refuses what the schema can tell is wrong.
func TestCRDOnAPIServer(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubecluster.InstallCRD(ctx, dyn, lbdeploy.CRD, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	pools := dyn.Resource(SchemeGroupVersion.WithResource(Resource))
	create := func(p *IPAddressPool) (*IPAddressPool, error) {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(SchemeGroupVersion.String())
		u.SetKind(Kind)
		// The discovery cache may lag the CRD by a moment: retry NotFound briefly.
		var got *unstructured.Unstructured
		for i := 0; i < 50; i++ {
			if got, err = pools.Create(ctx, u, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return nil, err
		}
		return FromUnstructured(got)
	}

	t.Run("full pool round-trips", func(t *testing.T) {
		got, err := create(full())
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if d := cmp.Diff(full().Spec, got.Spec); d != "" {
			t.Errorf("spec (-sent +stored):\n%s", d)
		}
		if _, err := Parse(got); err != nil {
			t.Errorf("Parse: %v", err)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		got, err := create(ipPool("minimal", IPAddressPoolSpec{Addresses: []string{"10.0.0.0/30"}}))
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if got.Spec.AutoAssign == nil || !*got.Spec.AutoAssign || got.Spec.Mode != "l2" {
			t.Errorf("defaults not applied: autoAssign %v mode %q", got.Spec.AutoAssign, got.Spec.Mode)
		}
	})
	t.Run("node-ip without addresses", func(t *testing.T) {
		got, err := create(ipPool("nodes", IPAddressPoolSpec{Mode: "node-ip"}))
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		p, err := Parse(got)
		if err != nil || p.Mode != alloc.ModeNodeIP {
			t.Errorf("Parse: %v, %v", p.Mode, err)
		}
	})
	for name, bad := range map[string]*IPAddressPool{
		"node-ip with addresses": ipPool("bad1", IPAddressPoolSpec{Mode: "node-ip", Addresses: []string{"10.0.0.0/30"}}),
		"l2 without addresses":   ipPool("bad2", IPAddressPoolSpec{}),
		"unknown mode":           ipPool("bad3", IPAddressPoolSpec{Mode: "bgp", Addresses: []string{"10.0.0.0/30"}}),
		"negative priority": ipPool("bad4", IPAddressPoolSpec{Addresses: []string{"10.0.0.0/30"},
			ServiceAllocation: &ServiceAllocation{Priority: -1}}),
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			if _, err := create(bad); !apierrors.IsInvalid(err) {
				t.Errorf("create: got %v, want Invalid", err)
			}
			if _, err := Parse(bad); err == nil {
				t.Error("Parse accepts what the apiserver refuses")
			}
		})
	}
}
