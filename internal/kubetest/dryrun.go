package kubetest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// DryRunner creates objects on a real apiserver with server-side dry run and
// strict field validation, as `kubectl apply --dry-run=server
// --validate=strict` would, and fails the test for every object the
// apiserver's defaulting, validation or admission refuses or warns about, whose
// metadata.namespace does not fit its kind's scope, or that was persisted
// anyway. Build it after any CRD the objects need is Established: its
// RESTMapper reads discovery lazily, once.
type DryRunner struct {
	t        *testing.T
	ctx      context.Context
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	warnings *Warnings
	// Client talks to the apiserver with the same warning handler.
	Client kubernetes.Interface
}

var dryRunAll = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}

// NewDryRunner returns a DryRunner on cfg's apiserver; it fails t when the
// clients cannot be built.
func NewDryRunner(t *testing.T, ctx context.Context, cfg *rest.Config) *DryRunner {
	t.Helper()
	w := &Warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return &DryRunner{t: t, ctx: ctx, dyn: dyn, warnings: w, Client: client,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))}
}

// Create dry-runs the creation of obj; what names it in messages (its file and
// kind/name). It reports every failure with t.Errorf and returns whether obj
// passed.
func (d *DryRunner) Create(what string, obj *unstructured.Unstructured) bool {
	t := d.t
	t.Helper()
	gvk := obj.GroupVersionKind()
	mapping, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return false
	}
	var ri dynamic.ResourceInterface = d.dyn.Resource(mapping.Resource)
	ns := obj.GetNamespace()
	switch namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace; {
	case namespaced && ns == "":
		t.Errorf("%s: namespaced %s without metadata.namespace", what, gvk.Kind)
		return false
	case !namespaced && ns != "":
		t.Errorf("%s: cluster-scoped %s with metadata.namespace %q", what, gvk.Kind, ns)
		return false
	case namespaced:
		ri = d.dyn.Resource(mapping.Resource).Namespace(ns)
	}
	ok := true
	if _, err := ri.Create(d.ctx, obj, dryRunAll); err != nil {
		t.Errorf("%s: dry-run create: %v", what, err)
		ok = false
	}
	if w := d.warnings.Take(); len(w) > 0 {
		t.Errorf("%s: apiserver warnings: %q", what, w)
		ok = false
	}
	if _, err := ri.Get(d.ctx, obj.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s: after dry run: get: %v (want NotFound)", what, err)
		ok = false
	}
	return ok
}

// CreatePod dry-runs the creation of pod (e.g. one from a workload's
// template), so it goes through Pod admission, and returns the Pod as the
// apiserver would have stored it, or nil after t.Errorf.
func (d *DryRunner) CreatePod(what string, pod *corev1.Pod) *corev1.Pod {
	t := d.t
	t.Helper()
	got, err := d.Client.CoreV1().Pods(pod.Namespace).Create(d.ctx, pod, dryRunAll)
	if err != nil {
		t.Errorf("%s: dry-run create: %v", what, err)
		return nil
	}
	if w := d.warnings.Take(); len(w) > 0 {
		t.Errorf("%s: apiserver warnings: %q", what, w)
	}
	return got
}
