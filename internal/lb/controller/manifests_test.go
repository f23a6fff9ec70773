package controller

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// TestDeployManifests holds deploy/lb to least privilege and the documented
// Deployment, without an apiserver (TestDeployRBAC shows the grants suffice).
func TestDeployManifests(t *testing.T) {
	ms := readManifests(t)
	for _, m := range ms {
		if ns := m.obj.GetNamespace(); ns != "" && ns != "kube-system" {
			t.Errorf("%v: namespace %q, want kube-system", m, ns)
		}
	}
	read := []string{"get", "list", "watch"}
	list := []string{"list", "watch"}
	var role rbacv1.ClusterRole
	find(t, ms, "ClusterRole", "svcnet-lb-controller", &role)
	checkRules(t, "ClusterRole "+role.Name, role.Rules, map[string][]string{
		"/services":                       read,
		"/services/status":                {"patch", "update"},
		"/namespaces":                     list,
		"/nodes":                          list,
		"discovery.k8s.io/endpointslices": list,
		"svcnet.io/ipaddresspools":        read,
		"svcnet.io/ipaddresspools/status": {"patch", "update"},
		"networking.k8s.io/servicecidrs":  list,
		"/events":                         {"create", "patch"},
		"events.k8s.io/events":            {"create", "patch"},
	})
	var leRole rbacv1.Role
	find(t, ms, "Role", "svcnet-lb-controller-leader-election", &leRole)
	checkRules(t, "Role "+leRole.Name, leRole.Rules, map[string][]string{
		"coordination.k8s.io/leases": {"create", "get", "update"},
	})
	for _, r := range leRole.Rules {
		if slices.Contains(r.Verbs, "update") && !slices.Equal(r.ResourceNames, []string{"svcnet-lb-controller"}) {
			t.Errorf("Role %s: update on leases %v, want only the Lease svcnet-lb-controller", leRole.Name, r.ResourceNames)
		}
	}
	var crb rbacv1.ClusterRoleBinding
	find(t, ms, "ClusterRoleBinding", "svcnet-lb-controller", &crb)
	var rb rbacv1.RoleBinding
	find(t, ms, "RoleBinding", "svcnet-lb-controller-leader-election", &rb)
	wantSubj := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "svcnet-lb-controller", Namespace: "kube-system"}}
	if crb.RoleRef.Name != role.Name || crb.RoleRef.Kind != "ClusterRole" || !slices.Equal(crb.Subjects, wantSubj) {
		t.Errorf("ClusterRoleBinding: roleRef %+v subjects %+v", crb.RoleRef, crb.Subjects)
	}
	if rb.RoleRef.Name != leRole.Name || rb.RoleRef.Kind != "Role" || !slices.Equal(rb.Subjects, wantSubj) {
		t.Errorf("RoleBinding: roleRef %+v subjects %+v", rb.RoleRef, rb.Subjects)
	}

	var d appsv1.Deployment
	find(t, ms, "Deployment", "svcnet-lb-controller", &d)
	checkDeployment(t, d)
}

// checkRules: the rules grant exactly want (group/resource -> sorted verbs),
// with no wildcard.
func checkRules(t *testing.T, what string, rules []rbacv1.PolicyRule, want map[string][]string) {
	t.Helper()
	got := map[string][]string{}
	for i, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("%s rule %d: nonResourceURLs %v", what, i, r.NonResourceURLs)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					gr := g + "/" + res
					if strings.Contains(gr, "*") || v == "*" {
						t.Errorf("%s rule %d: wildcard in %s %s", what, i, v, gr)
					}
					if !slices.Contains(got[gr], v) {
						got[gr] = append(got[gr], v)
					}
				}
			}
		}
	}
	for gr := range got {
		slices.Sort(got[gr])
	}
	for gr, verbs := range want {
		if !slices.Equal(got[gr], verbs) {
			t.Errorf("%s: %s verbs %v, want %v", what, gr, got[gr], verbs)
		}
	}
	for gr, verbs := range got {
		if _, ok := want[gr]; !ok {
			t.Errorf("%s: grants %v on %s, which the controller does not use", what, verbs, gr)
		}
	}
}

// checkDeployment: two replicas of `svcnet lb controller` with leader
// election, unprivileged, probed on the metrics address's /healthz.
func checkDeployment(t *testing.T, d appsv1.Deployment) {
	t.Helper()
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2 (leader-elected)", d.Spec.Replicas)
	}
	spec := d.Spec.Template.Spec
	if d.Spec.Selector == nil || !labelsSubset(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("selector %+v does not select the template's labels %v", d.Spec.Selector, d.Spec.Template.Labels)
	}
	if spec.ServiceAccountName != "svcnet-lb-controller" || spec.HostNetwork {
		t.Errorf("serviceAccountName %q hostNetwork %v, want svcnet-lb-controller, false", spec.ServiceAccountName, spec.HostNetwork)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	argv := append(slices.Clone(c.Command), c.Args...)
	if c.Image != kubetest.SvcnetImage || c.ImagePullPolicy != corev1.PullIfNotPresent || len(argv) < 3 || !slices.Equal(argv[:3], []string{"svcnet", "lb", "controller"}) {
		t.Errorf("image %q (pull %q) command %q, want %s (IfNotPresent) running svcnet lb controller", c.Image, c.ImagePullPolicy, argv, kubetest.SvcnetImage)
	}
	if !slices.Contains(argv, "--leader-elect=true") {
		t.Errorf("command %q: want --leader-elect=true with two replicas", argv)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
		!slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("container securityContext %+v: want unprivileged, no escalation, read-only root, all capabilities dropped, none added", sc)
	}
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext %+v: want runAsNonRoot", psc)
	}
	var port string
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			_, port, _ = net.SplitHostPort(v)
		}
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s %+v, want HTTP GET /healthz", p.name, p.probe)
			continue
		}
		pp := p.probe.HTTPGet.Port
		ok := false
		for _, cp := range c.Ports {
			if (pp.StrVal != "" && cp.Name == pp.StrVal || pp.IntValue() == int(cp.ContainerPort)) && port != "" && port == strconv.Itoa(int(cp.ContainerPort)) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s probes port %s, not --metrics-bind-address's port %q", p.name, pp.String(), port)
		}
	}
}

func labelsSubset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}
