package controller

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// deployDir holds svcnet lb's manifests.
const deployDir = "../../../deploy/lb"

// manifest is one YAML document of deploy/lb.
type manifest struct {
	file string
	obj  *unstructured.Unstructured
}

func (m manifest) String() string {
	return fmt.Sprintf("%s %s %s", m.file, m.obj.GetKind(), m.obj.GetName())
}

// readManifests returns the Kubernetes objects in deployDir's YAML files, in
// file then document order, except crd.yaml's (which tests install for real)
// and kustomization.yaml (a kustomize file, not an object).
func readManifests(t *testing.T) []manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML in %s: %v", deployDir, err)
	}
	var out []manifest
	for _, f := range files {
		base := filepath.Base(f)
		if base == "crd.yaml" || base == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s document %d: %v", base, i, err)
			}
			var obj map[string]any
			if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
				t.Fatalf("%s document %d: %v", base, i, err)
			}
			if len(obj) > 0 {
				out = append(out, manifest{file: base, obj: &unstructured.Unstructured{Object: obj}})
			}
		}
	}
	return out
}

// find returns the manifest of kind and name converted into into.
func find(t *testing.T, ms []manifest, kind, name string, into any) {
	t.Helper()
	for _, m := range ms {
		if m.obj.GetKind() == kind && m.obj.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m.obj.Object, into, true); err != nil {
				t.Fatalf("%v: %v", m, err)
			}
			return
		}
	}
	t.Fatalf("deploy/lb has no %s %s", kind, name)
}

// TestDeployKustomization: kustomization.yaml lists exactly the installing
// files (every manifest but the example pool), and they exist; its images
// field is the documented knob for the image.
func TestDeployKustomization(t *testing.T) {
	k := kubetest.ReadKustomization(t, deployDir)
	files, _ := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	var want []string
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && base != "example-pool.yaml" {
			want = append(want, base)
		}
	}
	if got := slices.Sorted(slices.Values(k.Resources)); !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml: resources %q, want %q", got, want)
	}
	kubetest.CheckImageKnob(t, deployDir, k)
}

// TestDeployDryRun (kube tier) installs crd.yaml for real, then creates every
// other object of deploy/lb with server-side dry run and strict field
// validation: the apiserver must accept each one without a warning, and persist
// none. A Pod from the Deployment's template goes through Pod admission too.
func TestDeployDryRun(t *testing.T) {
	ms := readManifests(t)
	e := startEnv(t)
	waitNamespace(t, e, "kube-system")
	ctx := apiCtx(t)

	// Discovery after the CRD: the mapper knows ipaddresspools.
	dr := kubetest.NewDryRunner(t, ctx, e.Config)
	for _, m := range ms {
		dr.Create(fmt.Sprint(m), m.obj)
	}

	var d appsv1.Deployment
	find(t, ms, "Deployment", "svcnet-lb-controller", &d)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dry-run", Namespace: d.Namespace, Labels: d.Spec.Template.Labels},
		Spec:       d.Spec.Template.Spec,
	}
	got := dr.CreatePod("a Pod from the Deployment's template", pod)
	if got == nil {
		return
	}
	if got.Spec.Priority == nil || *got.Spec.Priority != 2000000000 {
		t.Errorf("Pod priority %v, want system-cluster-critical's 2000000000", got.Spec.Priority)
	}
}

// TestDeployRBAC (kube tier) creates the ServiceAccount and RBAC objects of
// deploy/lb for real and runs the controller, leader-elected on the Lease the
// Deployment names, as that ServiceAccount (impersonated): it must sync, take
// the Lease, assign an address and record Events with exactly those grants.
func TestDeployRBAC(t *testing.T) {
	ms := readManifests(t)
	e := startEnv(t)
	waitNamespace(t, e, "kube-system")
	ctx := apiCtx(t)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Client.Discovery()))
	var sa corev1.ServiceAccount
	for _, m := range ms {
		switch m.obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		if m.obj.GetKind() == "ServiceAccount" {
			find(t, ms, "ServiceAccount", m.obj.GetName(), &sa)
		}
		gvk := m.obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		var ri dynamic.ResourceInterface = e.dyn.Resource(mapping.Resource)
		if ns := m.obj.GetNamespace(); ns != "" {
			ri = e.dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err := ri.Create(ctx, m.obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%v: create: %v", m, err)
		}
	}
	if sa.Name == "" {
		t.Fatal("deploy/lb has no ServiceAccount")
	}
	var d appsv1.Deployment
	find(t, ms, "Deployment", "svcnet-lb-controller", &d)
	if d.Spec.Template.Spec.ServiceAccountName != sa.Name || d.Namespace != sa.Namespace {
		t.Fatalf("Deployment runs as %s/%s, want the ServiceAccount %s/%s", d.Namespace, d.Spec.Template.Spec.ServiceAccountName, sa.Namespace, sa.Name)
	}
	le := testLease("rbac-test", flagValue(t, d, "--leader-elect-lease-name"))
	le.Namespace = flagValue(t, d, "--leader-elect-namespace")

	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("impersonated list of Secrets: %v, want Forbidden (is impersonation in effect?)", err)
	}
	c, err := New(client, dyn, Config{Plan: plan.Config{IsDefault: true}, FieldManager: "rbac-test"})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, func(ctx context.Context) error { return RunLeaderElected(ctx, client, le, c.Run) })

	e.createPool(t, "lab", "172.26.236.180-172.26.236.199")
	e.createService(t, "web", "")
	e.waitIPs(t, "web", "172.26.236.180")
	e.waitEvent(t, "web", ReasonIPAllocated, "172.26.236.180")
	// Pool status and Events on pools, with the ClusterRole's grants.
	e.waitPool(t, "lab", metav1.ConditionTrue, pool.ReasonAccepted)
	e.waitPoolEvent(t, "lab", ReasonPoolAccepted)
	e.waitHolder(t, le.Name, "rbac-test", 5*time.Second)
	if err := r.stop(t); err != nil {
		t.Errorf("RunLeaderElected after cancel: %v", err)
	}
	// Released on the way out, with the Role's get/update on the Lease.
	if h := e.lease(t, le.Name).Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("lease holder %q after a clean stop, want released", *h)
	}
}

// flagValue returns the value of --name=value in the Deployment's container
// args.
func flagValue(t *testing.T, d appsv1.Deployment, name string) string {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
	}
	t.Fatalf("Deployment %s sets no %s", d.Name, name)
	return ""
}
