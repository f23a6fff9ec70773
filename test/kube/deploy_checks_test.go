package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// The checks every component under deploy/ is held to (proxy, dns, cni).

// systemPriority is the value the Priority admission plugin gives a Pod of
// each system priority class.
var systemPriority = map[string]int32{
	"system-node-critical":    2000001000,
	"system-cluster-critical": 2000000000,
}

// readObjects returns the objects under dir (readManifests): every manifest
// but the kustomization.yaml files, which their own checks read.
func readObjects(t *testing.T, dir string) []manifest {
	t.Helper()
	var out []manifest
	for _, m := range readManifests(t, dir) {
		if m.obj.GetKind() != "Kustomization" {
			out = append(out, m)
		}
	}
	return out
}

// checkNamespace fails t for each namespaced object of ms outside namespace.
func checkNamespace(t *testing.T, ms []manifest, namespace string) {
	t.Helper()
	for _, m := range ms {
		if ns := m.obj.GetNamespace(); ns != "" && ns != namespace {
			t.Errorf("%v: namespace %q, want %q", m, ns, namespace)
		}
	}
}

// checkClusterRole: role grants exactly want, verbs by "group/resource"
// (core group: "/services"), in rules without aggregation, wildcards,
// resourceNames or nonResourceURLs.
func checkClusterRole(t *testing.T, role *rbacv1.ClusterRole, want map[string][]string) {
	t.Helper()
	if role.AggregationRule != nil {
		t.Errorf("ClusterRole %s: aggregationRule %+v: it would gain other roles' rules", role.Name, role.AggregationRule)
	}
	got := map[string][]string{}
	for i, r := range role.Rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("ClusterRole %s rule %d: nonResourceURLs %v resourceNames %v, want none", role.Name, i, r.NonResourceURLs, r.ResourceNames)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				gr := g + "/" + res
				for _, v := range r.Verbs {
					if strings.Contains(gr, "*") || v == "*" {
						t.Errorf("ClusterRole %s rule %d: wildcard (%s %s)", role.Name, i, v, gr)
					}
					if !slices.Contains(got[gr], v) {
						got[gr] = append(got[gr], v)
					}
				}
			}
		}
	}
	for _, gr := range slices.Sorted(maps.Keys(want)) {
		verbs := slices.Sorted(slices.Values(want[gr]))
		if slices.Sort(got[gr]); !slices.Equal(got[gr], verbs) {
			t.Errorf("ClusterRole %s: %s verbs %v, want %v", role.Name, gr, got[gr], verbs)
		}
	}
	for _, gr := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[gr]; !ok {
			t.Errorf("ClusterRole %s: grants %v on %s, want none", role.Name, got[gr], gr)
		}
	}
}

// checkClusterRoleBinding: ClusterRoleBinding name binds ClusterRole name to
// exactly ServiceAccount namespace/serviceAccount.
func checkClusterRoleBinding(t *testing.T, idx manifestIndex, name, namespace, serviceAccount string) {
	t.Helper()
	var binding rbacv1.ClusterRoleBinding
	if !idx.get(t, "ClusterRoleBinding", "", name, &binding) {
		return
	}
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	wantSubj := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: namespace}}
	if binding.RoleRef != wantRef || !slices.Equal(binding.Subjects, wantSubj) {
		t.Errorf("ClusterRoleBinding %s: roleRef %+v subjects %+v, want %+v %+v", name, binding.RoleRef, binding.Subjects, wantRef, wantSubj)
	}
}

// checkSelector fails t unless sel selects the Pod template's labels, by
// labels alone (no expressions); it returns whether it does.
func checkSelector(t *testing.T, sel *metav1.LabelSelector, labels map[string]string) bool {
	t.Helper()
	if sel == nil || !labelsMatch(sel.MatchLabels, labels) || len(sel.MatchExpressions) > 0 {
		t.Errorf("selector %+v does not select template labels %v", sel, labels)
		return false
	}
	return true
}

// checkImage: the container runs image, pulled only if not present.
func checkImage(t *testing.T, c corev1.Container, image string) {
	t.Helper()
	if c.Image != image || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %q pull policy %q, want %q %q (an image imported on the node needs no registry)",
			c.Image, c.ImagePullPolicy, image, corev1.PullIfNotPresent)
	}
}

// checkUnprivileged: the container has a securityContext, is not
// privileged, cannot gain privileges, and has a read-only root filesystem.
// Its capabilities and user are each component's to check.
func checkUnprivileged(t *testing.T, sc *corev1.SecurityContext) {
	t.Helper()
	if sc == nil {
		t.Fatalf("container has no securityContext")
	}
	if (sc.Privileged != nil && *sc.Privileged) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("privileged %s allowPrivilegeEscalation %s, want false false", fmtPtr(sc.Privileged), fmtPtr(sc.AllowPrivilegeEscalation))
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("readOnlyRootFilesystem %s, want true", fmtPtr(sc.ReadOnlyRootFilesystem))
	}
}

// startDryRun starts a kube-apiserver with o, waits for namespace, and
// dry-runs the creation of every object in ms (kubetest.DryRunner: server-side
// dry run, strict field validation, no warning). The DryRunner is good for
// two minutes.
func startDryRun(t *testing.T, ms []manifest, namespace string, o kubetest.Options) *kubetest.DryRunner {
	t.Helper()
	env := kubetest.Start(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	kubetest.Eventually(t, 30*time.Second, "namespace "+namespace, func() (bool, string) {
		_, err := env.Client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	dr := kubetest.NewDryRunner(t, ctx, env.Config)
	for _, m := range ms {
		dr.Create(fmt.Sprint(m), m.obj)
	}
	return dr
}

// dryRunTemplatePod puts a Pod made from the Pod template of kind (a
// DaemonSet, a Deployment) owner through Pod validation and admission (dry
// run), which creating the owner does not: its priority class must exist,
// be allowed in the namespace, and resolve to priorityClass's value.
// (kubetest's apiserver runs without the ServiceAccount admission plugin, so
// the ServiceAccount's existence is for the manifests' own tests to check.)
func dryRunTemplatePod(t *testing.T, dr *kubetest.DryRunner, kind string, owner metav1.ObjectMeta, tmpl corev1.PodTemplateSpec, priorityClass string) {
	t.Helper()
	want, ok := systemPriority[priorityClass]
	if !ok {
		t.Fatalf("no value known for priority class %q", priorityClass)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: owner.Name + "-dry-run", Namespace: owner.Namespace, Labels: tmpl.Labels},
		Spec:       tmpl.Spec,
	}
	got := dr.CreatePod(fmt.Sprintf("%s %s: a Pod from its template", kind, owner.Name), pod)
	if got == nil {
		return
	}
	// The Priority admission plugin resolved the class to its value.
	if got.Spec.Priority == nil || *got.Spec.Priority != want {
		t.Errorf("%s %s: Pod priority %s, want %s's %d", kind, owner.Name, fmtPtr(got.Spec.Priority), priorityClass, want)
	}
}
