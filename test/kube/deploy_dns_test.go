package kube

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// deployDNSDir holds the manifests for running `svcnet dns` as a real
// cluster's DNS.
const deployDNSDir = "../../deploy/dns"

// The objects deploy/dns must contain, and the properties the tests below hold
// them to.
const (
	dnsNamespace   = "kube-system"
	dnsName        = "svcnet-dns" // Deployment, ServiceAccount, ClusterRole(Binding)
	dnsServiceName = "kube-dns"
	dnsClusterIP   = "10.96.0.10"
	dnsImage       = kubetest.SvcnetImage
	dnsMetricsPort = 9153
)

// dnsArgv is the Deployment's command line.
var dnsArgv = []string{"svcnet", "dns", "--listen=:53", "--metrics-bind-address=:9153", "--upstream=/etc/resolv.conf"}

// readDNSManifests returns deploy/dns's objects and its kustomization.yaml.
func readDNSManifests(t *testing.T) (objs []manifest, kustomization map[string]any) {
	t.Helper()
	for _, m := range readManifests(t, deployDNSDir) {
		if m.obj.GetKind() == "Kustomization" {
			kustomization = m.obj.Object
			continue
		}
		objs = append(objs, m)
	}
	if kustomization == nil {
		t.Fatalf("%s has no kustomization.yaml", deployDNSDir)
	}
	return objs, kustomization
}

// TestDeployDNSManifests holds deploy/dns to what its comments promise, without
// an apiserver: kustomization.yaml lists every file; the objects live in
// kube-system; RBAC is read-only; the Deployment runs two unprivileged replicas
// of `svcnet dns` on :53 with readiness on /healthz; and the Service is
// kube-dns-compatible and selects the Deployment's Pods.
func TestDeployDNSManifests(t *testing.T) {
	ms, _ := readDNSManifests(t)
	checkKustomization(t, deployDNSDir)
	idx := indexManifests(t, ms)
	checkNamespace(t, ms, dnsNamespace)
	var sa corev1.ServiceAccount
	idx.get(t, "ServiceAccount", dnsNamespace, dnsName, &sa)
	var role rbacv1.ClusterRole
	if idx.get(t, "ClusterRole", "", dnsName, &role) {
		checkDNSClusterRole(t, &role)
	}
	checkClusterRoleBinding(t, idx, dnsName, dnsNamespace, dnsName)
	var d appsv1.Deployment
	var svc corev1.Service
	okD := idx.get(t, "Deployment", dnsNamespace, dnsName, &d)
	okS := idx.get(t, "Service", dnsNamespace, dnsServiceName, &svc)
	if okD {
		checkDNSDeployment(t, &d)
	}
	if okD && okS {
		checkDNSService(t, &svc, &d)
	}
}

// checkKustomization: dir/kustomization.yaml's resources are exactly the other
// YAML files in dir, and its images field is the documented knob.
func checkKustomization(t *testing.T, dir string) {
	t.Helper()
	kust := kubetest.ReadKustomization(t, dir)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	if got := slices.Sorted(slices.Values(kust.Resources)); !slices.Equal(got, want) {
		t.Errorf("%s/kustomization.yaml resources %q, want every other file: %q", dir, got, want)
	}
	kubetest.CheckImageKnob(t, dir, kust)
}

// checkDNSClusterRole: list and watch on exactly services, pods, namespaces,
// nodes and endpointslices; nothing else, no other verb.
func checkDNSClusterRole(t *testing.T, role *rbacv1.ClusterRole) {
	t.Helper()
	want := map[string][]string{}
	for _, gr := range []string{"/namespaces", "/nodes", "/pods", "/services", "discovery.k8s.io/endpointslices"} {
		want[gr] = []string{"list", "watch"}
	}
	checkClusterRole(t, role, want)
}

// checkDNSDeployment: two replicas of `svcnet dns` on :53, metrics and
// /healthz on 9153; its own selector; the Pods labelled k8s-app: kube-dns;
// the node's resolver (dnsPolicy Default); system-cluster-critical; non-root,
// no capability, port 53 through the ip_unprivileged_port_start sysctl.
func checkDNSDeployment(t *testing.T, d *appsv1.Deployment) {
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %s, want 2", fmtPtr(d.Spec.Replicas))
	}
	if checkSelector(t, d.Spec.Selector, d.Spec.Template.Labels) {
		if _, ok := d.Spec.Selector.MatchLabels["k8s-app"]; ok {
			t.Errorf("selector %v uses k8s-app, which CoreDNS's Deployment selects too", d.Spec.Selector.MatchLabels)
		}
	}
	if d.Spec.Template.Labels["k8s-app"] != "kube-dns" {
		t.Errorf("template labels %v lack k8s-app: kube-dns", d.Spec.Template.Labels)
	}
	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName != dnsName || spec.DNSPolicy != corev1.DNSDefault || spec.PriorityClassName != "system-cluster-critical" || spec.HostNetwork {
		t.Errorf("serviceAccountName %q dnsPolicy %q priorityClassName %q hostNetwork %v, want %q %q system-cluster-critical false",
			spec.ServiceAccountName, spec.DNSPolicy, spec.PriorityClassName, spec.HostNetwork, dnsName, corev1.DNSDefault)
	}
	if len(spec.Containers) != 1 || len(spec.InitContainers) > 0 {
		t.Fatalf("%d containers, %d init containers: want exactly one container", len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	checkImage(t, c, dnsImage)
	if argv := append(slices.Clone(c.Command), c.Args...); !slices.Equal(argv, dnsArgv) {
		t.Errorf("command %q, want %q", argv, dnsArgv)
	}
	var ports []string
	for _, p := range c.Ports {
		ports = append(ports, fmt.Sprintf("%s %d/%s", p.Name, p.ContainerPort, p.Protocol))
	}
	if want := []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}; !slices.Equal(ports, want) {
		t.Errorf("container ports %q, want %q", ports, want)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || containerPort(c, p.HTTPGet.Port) != dnsMetricsPort {
		t.Errorf("readinessProbe %+v, want HTTP GET /healthz on the metrics port %d", p, dnsMetricsPort)
	}
	checkDNSSecurity(t, spec.SecurityContext, c.SecurityContext)
}

func checkDNSSecurity(t *testing.T, pod *corev1.PodSecurityContext, sc *corev1.SecurityContext) {
	if pod == nil || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || pod.RunAsUser == nil || *pod.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v, want runAsNonRoot and a non-zero runAsUser", pod)
	} else if i := slices.IndexFunc(pod.Sysctls, func(s corev1.Sysctl) bool { return s.Name == "net.ipv4.ip_unprivileged_port_start" }); i < 0 {
		t.Errorf("sysctls %+v: want net.ipv4.ip_unprivileged_port_start, so the non-root process binds :53", pod.Sysctls)
	} else if v, err := strconv.Atoi(pod.Sysctls[i].Value); err != nil || v > 53 {
		t.Errorf("sysctl net.ipv4.ip_unprivileged_port_start=%q, want at most 53", pod.Sysctls[i].Value)
	}
	checkUnprivileged(t, sc)
	if sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("capabilities %+v, want drop ALL and add none", sc.Capabilities)
	}
}

// checkDNSService: kube-system/kube-dns at 10.96.0.10, labelled and selecting
// k8s-app: kube-dns (which the Deployment's Pods carry), ports dns 53/UDP,
// dns-tcp 53/TCP and metrics 9153/TCP to the container's ports of those names.
func checkDNSService(t *testing.T, svc *corev1.Service, d *appsv1.Deployment) {
	if svc.Spec.ClusterIP != dnsClusterIP || svc.Labels["k8s-app"] != "kube-dns" {
		t.Errorf("Service kube-dns: clusterIP %q labels %v, want %s and k8s-app: kube-dns", svc.Spec.ClusterIP, svc.Labels, dnsClusterIP)
	}
	if !slices.Equal(mapKeys(svc.Spec.Selector), []string{"k8s-app"}) || !labelsMatch(svc.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("Service kube-dns: selector %v, want k8s-app: kube-dns selecting the Deployment's Pods (%v)", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	c := d.Spec.Template.Spec.Containers[0]
	var got []string
	for _, p := range svc.Spec.Ports {
		target := containerPort(c, p.TargetPort)
		if p.TargetPort.Type == intstr.String {
			target = 0 // kube-dns's targets are numbers, as CoreDNS's
		}
		got = append(got, fmt.Sprintf("%s %d/%s->%d", p.Name, p.Port, p.Protocol, target))
	}
	if want := []string{"dns 53/UDP->53", "dns-tcp 53/TCP->53", "metrics 9153/TCP->9153"}; !slices.Equal(got, want) {
		t.Errorf("Service kube-dns ports %q, want %q", got, want)
	}
}

func mapKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestDeployDNSDryRun creates every object in deploy/dns on a real
// kube-apiserver with server-side dry run and strict field validation: the
// apiserver's defaulting, validation and admission accept each without a
// warning (the Service's clusterIP 10.96.0.10 is in its range), and nothing is
// persisted. Then a Pod from the Deployment's template goes through Pod
// admission the same way (its priority class resolves).
func TestDeployDNSDryRun(t *testing.T) {
	ms, _ := readDNSManifests(t)
	dr := startDryRun(t, ms, dnsNamespace, kubetest.Options{})
	if t.Failed() {
		return
	}
	var d appsv1.Deployment
	if indexManifests(t, ms).get(t, "Deployment", dnsNamespace, dnsName, &d) {
		dryRunTemplatePod(t, dr, "Deployment", d.ObjectMeta, d.Spec.Template, "system-cluster-critical")
	}
}
