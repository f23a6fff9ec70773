package kube

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lb/members"
)

// deployProxyDir holds the manifests for running `svcnet proxy` on a real cluster.
const deployProxyDir = "../../deploy/proxy"

// The objects deploy/proxy must contain, and the properties the tests below hold
// them to.
const (
	proxyNamespace      = "kube-system"
	proxyServiceAccount = "svcnet-proxy"
	proxyImage          = "ghcr.io/svcnet/svcnet:latest"
	proxyConfigKey      = "proxy.yaml"
	kubeProxyHealthz    = 10256
	kubeProxyMetrics    = 10249
)

// The speakers' heartbeat key: a Secret the user creates (README.md), as
// MetalLB's memberlist Secret.
const (
	memberlistSecret = "svcnet-memberlist"
	memberlistKey    = "secretkey"
)

// proxyDaemonSets are the two modes: replacing kube-proxy, and beside it.
var proxyDaemonSets = []struct {
	name, configMap string
	// proxyName is --service-proxy-name ("" when the flag must be absent).
	proxyName string
	// kubeProxyPorts: healthz and metrics on kube-proxy's ports (replacement), or
	// on others (beside kube-proxy, which holds them on the same host network).
	kubeProxyPorts bool
	// announce: the layer-2 speaker runs (--announce=l2, NET_RAW added):
	// replacement mode, where svcnet serves the LoadBalancer IPs.
	announce bool
}{
	{name: "svcnet-proxy", configMap: "svcnet-proxy", kubeProxyPorts: true, announce: true},
	{name: "svcnet-proxy-beside", configMap: "svcnet-proxy-beside", proxyName: "svcnet"},
}

// manifest is one YAML document from deploy/proxy.
type manifest struct {
	file string // relative to deployProxyDir
	obj  *unstructured.Unstructured
}

func (m manifest) String() string {
	return fmt.Sprintf("%s %s %s", m.file, m.obj.GetKind(), objKey(m.obj.GetNamespace(), m.obj.GetName()))
}

func objKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// readManifests returns every non-empty YAML document in the .yaml/.yml files
// under dir, recursively, in file then document order. Duplicate keys in a
// document are errors.
func readManifests(t *testing.T, dir string) []manifest {
	t.Helper()
	var out []manifest
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: document %d: %w", rel, i, err)
			}
			var obj map[string]any
			if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
				return fmt.Errorf("%s: document %d: %w", rel, i, err)
			}
			if len(obj) == 0 {
				continue // only comments or "---"
			}
			out = append(out, manifest{file: rel, obj: &unstructured.Unstructured{Object: obj}})
		}
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	if len(out) == 0 {
		t.Fatalf("no manifests under %s", dir)
	}
	return out
}

// readProxyManifests returns the objects under deploy/proxy (readObjects);
// TestDeployProxyKustomizations checks the kustomization.yaml files.
func readProxyManifests(t *testing.T) []manifest {
	t.Helper()
	return readObjects(t, deployProxyDir)
}

// TestDeployProxyKustomizations: `kubectl apply -k deploy/proxy` installs
// replacement mode, `kubectl apply -k deploy/proxy/beside-kube-proxy` beside
// mode; both take the identity and permissions from rbac/ (kustomize loads no
// file from outside a kustomization's directory), and each has the documented
// images knob. (TestDeployKustomize renders them with kubectl.)
func TestDeployProxyKustomizations(t *testing.T) {
	for _, want := range []struct {
		dir       string
		resources []string
		image     bool
	}{
		{deployProxyDir, []string{"rbac", "configmap.yaml", "daemonset.yaml"}, true},
		{filepath.Join(deployProxyDir, "beside-kube-proxy"), []string{"../rbac", "configmap.yaml", "daemonset.yaml"}, true},
		{filepath.Join(deployProxyDir, "rbac"), []string{"serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml"}, false},
	} {
		k := kubetest.ReadKustomization(t, want.dir)
		if !slices.Equal(k.Resources, want.resources) || len(k.Patches) > 0 {
			t.Errorf("%s/kustomization.yaml: resources %q patches %d, want %q and none", want.dir, k.Resources, len(k.Patches), want.resources)
		}
		if want.image {
			kubetest.CheckImageKnob(t, want.dir, k)
		} else if len(k.Images) > 0 {
			t.Errorf("%s/kustomization.yaml: images %+v for no container", want.dir, k.Images)
		}
	}
}

// manifestIndex finds manifests by kind and namespace/name.
type manifestIndex map[string]manifest

func indexManifests(t *testing.T, ms []manifest) manifestIndex {
	t.Helper()
	idx := manifestIndex{}
	for _, m := range ms {
		k := m.obj.GetKind() + " " + objKey(m.obj.GetNamespace(), m.obj.GetName())
		if prev, ok := idx[k]; ok {
			t.Errorf("%v: duplicate of %v", m, prev)
		}
		idx[k] = m
	}
	return idx
}

// get converts the manifest of kind and namespace/name into into, failing t when
// it is missing or has a field the typed object lacks.
func (idx manifestIndex) get(t *testing.T, kind, namespace, name string, into any) bool {
	t.Helper()
	m, ok := idx[kind+" "+objKey(namespace, name)]
	if !ok {
		t.Errorf("the manifests have no %s %s", kind, objKey(namespace, name))
		return false
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m.obj.Object, into, true); err != nil {
		t.Errorf("%v: %v", m, err)
		return false
	}
	return true
}

// TestDeployProxyManifests holds deploy/proxy to what its README promises, without
// an apiserver: the objects exist, RBAC is least privilege, the DaemonSets are not
// privileged, and each mounted proxy.yaml is a KubeProxyConfiguration with the
// documented values.
func TestDeployProxyManifests(t *testing.T) {
	ms := readProxyManifests(t)
	idx := indexManifests(t, ms)
	checkNamespace(t, ms, proxyNamespace)
	var sa corev1.ServiceAccount
	idx.get(t, "ServiceAccount", proxyNamespace, proxyServiceAccount, &sa)

	var role rbacv1.ClusterRole
	if idx.get(t, "ClusterRole", "", "svcnet-proxy", &role) {
		checkProxyClusterRole(t, &role)
	}
	checkClusterRoleBinding(t, idx, "svcnet-proxy", proxyNamespace, proxyServiceAccount)
	selectors := map[string]string{}
	for _, want := range proxyDaemonSets {
		t.Run(want.name, func(t *testing.T) {
			var ds appsv1.DaemonSet
			if !idx.get(t, "DaemonSet", proxyNamespace, want.name, &ds) {
				return
			}
			sel := metav1.FormatLabelSelector(ds.Spec.Selector)
			if other, ok := selectors[sel]; ok {
				t.Errorf("selector %s is also DaemonSet %s's: each would adopt the other's Pods", sel, other)
			}
			selectors[sel] = want.name
			checkProxyDaemonSet(t, idx, &ds, want.configMap, want.proxyName, want.kubeProxyPorts, want.announce)
		})
	}
}

// checkProxyClusterRole: get/list/watch on exactly services, nodes and
// endpointslices; create/patch on events (core and events.k8s.io); nothing else,
// so no write verb on anything but events.
func checkProxyClusterRole(t *testing.T, role *rbacv1.ClusterRole) {
	t.Helper()
	read := []string{"get", "list", "watch"}
	write := []string{"create", "patch"}
	checkClusterRole(t, role, map[string][]string{
		"/services":                       read,
		"/nodes":                          read,
		"discovery.k8s.io/endpointslices": read,
		"/events":                         write,
		"events.k8s.io/events":            write,
	})
}

// checkProxyDaemonSet checks one DaemonSet's Pod template, and the proxy.yaml it
// mounts from ConfigMap configMap.
func checkProxyDaemonSet(t *testing.T, idx manifestIndex, ds *appsv1.DaemonSet, configMap, proxyName string, kubeProxyPorts, announce bool) {
	spec := ds.Spec.Template.Spec
	checkSelector(t, ds.Spec.Selector, ds.Spec.Template.Labels)
	if u := ds.Spec.UpdateStrategy; u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil ||
		u.RollingUpdate.MaxUnavailable == nil || (*u.RollingUpdate.MaxUnavailable != intstr.FromInt32(1) && *u.RollingUpdate.MaxUnavailable != intstr.FromString("10%")) {
		t.Errorf("updateStrategy %+v, want RollingUpdate with maxUnavailable 1 or 10%%", u)
	}
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v dnsPolicy %q, want true %q", spec.HostNetwork, spec.DNSPolicy, corev1.DNSClusterFirstWithHostNet)
	}
	if spec.HostPID || spec.HostIPC {
		t.Errorf("hostPID %v hostIPC %v, want neither", spec.HostPID, spec.HostIPC)
	}
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q, want system-node-critical", spec.PriorityClassName)
	}
	if !slices.Contains(spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists}) {
		t.Errorf("tolerations %+v: none tolerates every taint (operator Exists, no key, no effect)", spec.Tolerations)
	}
	if spec.ServiceAccountName != proxyServiceAccount {
		t.Errorf("serviceAccountName %q, want %q", spec.ServiceAccountName, proxyServiceAccount)
	}
	// Replacing kube-proxy, svcnet owns the conntrack sysctls: one privileged
	// init container sets them; beside kube-proxy, kube-proxy does.
	wantInit := 0
	if kubeProxyPorts {
		wantInit = 1
	}
	if len(spec.Containers) != 1 || len(spec.InitContainers) != wantInit {
		t.Fatalf("%d containers, %d init containers: want exactly one container and %d init containers", len(spec.Containers), len(spec.InitContainers), wantInit)
	}
	c := spec.Containers[0]
	if wantInit == 1 {
		checkProxyInitContainer(t, spec, spec.InitContainers[0], c)
	}
	checkImage(t, c, proxyImage)
	checkProxySecurity(t, spec.SecurityContext, c.SecurityContext, announce)
	checkProxyCommand(t, c, proxyName, announce)
	checkProxyResources(t, c.Resources)
	checkProxyVolumes(t, idx, spec, c)
	checkProxyKeyFile(t, spec, c, announce)

	cfg := proxyConfigOf(t, idx, spec, c, configMap)
	if cfg == nil {
		return
	}
	checkProxyConfig(t, cfg, kubeProxyPorts)
	_, healthz := splitBind(t, "healthzBindAddress", cfg.HealthzBindAddress)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/livez"}, {"readinessProbe", c.ReadinessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s %+v, want HTTP GET %s", p.name, p.probe, p.path)
			continue
		}
		g := p.probe.HTTPGet
		if port := containerPort(c, g.Port); g.Path != p.path || port != healthz {
			t.Errorf("%s: GET %s on port %d (%s), want %s on healthzBindAddress's port %d", p.name, g.Path, port, g.Port.String(), p.path, healthz)
		}
		if g.Host != "" || (g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP) {
			t.Errorf("%s: host %q scheme %q, want the Pod's (node's) IP over HTTP", p.name, g.Host, g.Scheme)
		}
	}
}

// checkProxyInitContainer: the init container runs `svcnet proxy --init-only`
// with the proxy's own --config and host name and nothing else; it is the one
// privileged container (the conntrack sysctls need a writable /proc/sys) and
// mounts only the configuration, read-only.
func checkProxyInitContainer(t *testing.T, spec corev1.PodSpec, ic, proxy corev1.Container) {
	argv := append(slices.Clone(ic.Command), ic.Args...)
	want := []string{"svcnet", "proxy"}
	for _, a := range append(slices.Clone(proxy.Command), proxy.Args...) {
		if strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "--hostname-override=") {
			want = append(want, a)
		}
	}
	want = append(want, "--init-only")
	if !slices.Equal(argv, want) {
		t.Errorf("init container %s: command %q, want %q", ic.Name, argv, want)
	}
	if ic.Image != proxy.Image || ic.ImagePullPolicy != proxy.ImagePullPolicy {
		t.Errorf("init container %s: image %s (%s), want the proxy's %s (%s)", ic.Name, ic.Image, ic.ImagePullPolicy, proxy.Image, proxy.ImagePullPolicy)
	}
	if !reflect.DeepEqual(ic.Env, proxy.Env[:1]) || ic.Env[0].Name != "NODE_NAME" {
		t.Errorf("init container %s: env %+v, want NODE_NAME only", ic.Name, ic.Env)
	}
	if sc := ic.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("init container %s: securityContext %+v, want privileged with a read-only root filesystem", ic.Name, sc)
	}
	var config corev1.VolumeMount
	for _, m := range proxy.VolumeMounts {
		if m.MountPath == "/etc/svcnet" {
			config = m
		}
	}
	if len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0] != config || !config.ReadOnly {
		t.Errorf("init container %s: volume mounts %+v, want only the proxy's configuration %+v, read-only", ic.Name, ic.VolumeMounts, config)
	}
}

func fmtDuration(d *metav1.Duration) string {
	if d == nil {
		return "<unset>"
	}
	return d.Duration.String()
}

func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// containerPort resolves a probe's port (number or container port name); 0 when
// the name is unknown.
func containerPort(c corev1.Container, p intstr.IntOrString) int {
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			if cp.HostPort != 0 && cp.HostPort != cp.ContainerPort {
				return 0 // a host-network Pod's hostPort must equal its containerPort
			}
			return int(cp.ContainerPort)
		}
	}
	return 0
}

// checkProxySecurity: not privileged; all capabilities dropped, NET_ADMIN the only
// one added, and NET_RAW too with the layer-2 speaker (announce); read-only root
// filesystem; no privilege escalation.
func checkProxySecurity(t *testing.T, pod *corev1.PodSecurityContext, sc *corev1.SecurityContext, announce bool) {
	checkUnprivileged(t, sc)
	wantCaps := []corev1.Capability{"NET_ADMIN"}
	if announce {
		wantCaps = append(wantCaps, "NET_RAW")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Add, wantCaps) ||
		!slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("capabilities %+v, want drop ALL, add exactly %v", sc.Capabilities, wantCaps)
	}
	if pod != nil && pod.SeccompProfile != nil && pod.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
		t.Errorf("pod seccompProfile Unconfined")
	}
	if sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
		t.Errorf("container seccompProfile Unconfined")
	}
}

func fmtPtr[T any](p *T) string {
	if p == nil {
		return "<unset>"
	}
	return fmt.Sprint(*p)
}

// checkProxyCommand: `svcnet proxy` with --hostname-override from NODE_NAME (the
// downward API's spec.nodeName), --config, --service-proxy-name exactly when
// proxyName is set, and --announce=l2 exactly when announce.
func checkProxyCommand(t *testing.T, c corev1.Container, proxyName string, announce bool) {
	argv := append(slices.Clone(c.Command), c.Args...)
	if len(argv) < 2 || argv[0] != "svcnet" || argv[1] != "proxy" {
		t.Errorf("command %q, want svcnet proxy ...", argv)
	}
	if !slices.Contains(argv, "--hostname-override=$(NODE_NAME)") {
		t.Errorf("command %q lacks --hostname-override=$(NODE_NAME)", argv)
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "NODE_NAME" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v: want NODE_NAME from fieldRef spec.nodeName", c.Env)
	}
	var names []string
	for _, a := range argv {
		if strings.HasPrefix(a, "--service-proxy-name") {
			names = append(names, a)
		}
	}
	want := []string(nil)
	if proxyName != "" {
		want = []string{"--service-proxy-name=" + proxyName}
	}
	if !slices.Equal(names, want) {
		t.Errorf("command %q: service proxy name flags %q, want %q", argv, names, want)
	}
	if got := slices.Contains(argv, "--announce=l2"); got != announce {
		t.Errorf("command %q: --announce=l2 present %v, want %v", argv, got, announce)
	}
	for _, a := range argv {
		if strings.HasPrefix(a, "--announce-insecure") {
			t.Errorf("command %q: %s: the speaker's heartbeats must be signed", argv, a)
		}
	}
}

// checkProxyKeyFile: with the speaker (announce), --announce-key-file names the
// file of key secretkey of Secret svcnet-memberlist, mounted read-only and not
// optional (a missing Secret holds the Pod back; it never starts unsigned);
// without it, neither the flag nor the Secret.
func checkProxyKeyFile(t *testing.T, spec corev1.PodSpec, c corev1.Container, announce bool) {
	var files []string
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		if v, ok := strings.CutPrefix(a, "--announce-key-file="); ok {
			files = append(files, v)
		} else if a == "--announce-key-file" {
			t.Errorf("--announce-key-file without =FILE: write it as one argument")
		}
	}
	secretVolumes := 0
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			secretVolumes++
		}
	}
	if !announce {
		if len(files) > 0 || secretVolumes > 0 {
			t.Errorf("no speaker, but --announce-key-file %q and %d Secret volumes", files, secretVolumes)
		}
		return
	}
	if len(files) != 1 {
		t.Errorf("--announce-key-file given %d times (%q), want once", len(files), files)
		return
	}
	file := files[0]
	mi := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return path.Dir(file) == path.Clean(m.MountPath) })
	if mi < 0 {
		t.Errorf("--announce-key-file=%s is not a file in any volume mount %+v", file, c.VolumeMounts)
		return
	}
	mount := c.VolumeMounts[mi]
	vi := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if vi < 0 || spec.Volumes[vi].Secret == nil || spec.Volumes[vi].Secret.SecretName != memberlistSecret {
		t.Errorf("--announce-key-file=%s: volume %s is not Secret %s", file, mount.Name, memberlistSecret)
		return
	}
	sv := spec.Volumes[vi].Secret
	if sv.Optional != nil && *sv.Optional {
		t.Errorf("Secret volume %s is optional: without the Secret the speaker must not start", mount.Name)
	}
	if sv.DefaultMode != nil && *sv.DefaultMode&0o077 != 0 {
		t.Errorf("Secret volume %s: defaultMode %#o, want no access for group and others", mount.Name, *sv.DefaultMode)
	}
	key := path.Base(file)
	if len(sv.Items) > 0 {
		ii := slices.IndexFunc(sv.Items, func(it corev1.KeyToPath) bool { return it.Path == key })
		if ii < 0 {
			t.Errorf("--announce-key-file=%s: Secret volume %s has no item with path %s", file, mount.Name, key)
			return
		}
		key = sv.Items[ii].Key
	}
	if key != memberlistKey {
		t.Errorf("--announce-key-file=%s is Secret %s key %q, want %q", file, memberlistSecret, key, memberlistKey)
	}
	if secretVolumes != 1 {
		t.Errorf("%d Secret volumes, want only %s", secretVolumes, memberlistSecret)
	}
}

func checkProxyResources(t *testing.T, r corev1.ResourceRequirements) {
	for _, q := range []struct {
		what string
		list corev1.ResourceList
		name corev1.ResourceName
		want string
	}{
		{"requests", r.Requests, corev1.ResourceCPU, "100m"},
		{"requests", r.Requests, corev1.ResourceMemory, "64Mi"},
		{"limits", r.Limits, corev1.ResourceMemory, "256Mi"},
	} {
		if got, ok := q.list[q.name]; !ok || got.Cmp(resource.MustParse(q.want)) != 0 {
			t.Errorf("resources.%s.%s %v, want %s", q.what, q.name, got.String(), q.want)
		}
	}
}

// checkProxyVolumes: host paths are /lib/modules only, mounted read-only; every
// volume mount is read-only; every ConfigMap a volume or env var names is in
// deploy/proxy or optional.
func checkProxyVolumes(t *testing.T, idx manifestIndex, spec corev1.PodSpec, c corev1.Container) {
	mounted := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("volumeMount %s at %s is writable", m.Name, m.MountPath)
		}
		mounted[m.Name] = m
	}
	sawModules := false
	for _, v := range spec.Volumes {
		switch {
		case v.HostPath != nil:
			if v.HostPath.Path != "/lib/modules" || mounted[v.Name].MountPath != "/lib/modules" {
				t.Errorf("hostPath volume %s (%s mounted at %q): the only host path is /lib/modules", v.Name, v.HostPath.Path, mounted[v.Name].MountPath)
			}
			sawModules = true
		case v.ConfigMap != nil:
			if _, ok := idx["ConfigMap "+objKey(proxyNamespace, v.ConfigMap.Name)]; !ok && (v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional) {
				t.Errorf("volume %s: ConfigMap %s is not in deploy/proxy", v.Name, v.ConfigMap.Name)
			}
		}
	}
	if !sawModules {
		t.Errorf("volumes %+v: no read-only /lib/modules", spec.Volumes)
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.ConfigMapKeyRef
		if _, ok := idx["ConfigMap "+objKey(proxyNamespace, ref.Name)]; !ok || ref.Optional == nil || !*ref.Optional {
			// The shipped ConfigMaps leave such keys out, so they must be optional.
			t.Errorf("env %s: ConfigMap %s key %s must be in deploy/proxy and optional", e.Name, ref.Name, ref.Key)
		}
	}
}

// kubeProxyConfiguration mirrors kube-proxy's KubeProxyConfiguration
// (kubeproxy.config.k8s.io/v1alpha1, k8s.io/kube-proxy/config/v1alpha1): the
// fields the manifests set are typed, the rest accepted unchecked, so strict
// decoding rejects exactly the names kube-proxy's own strict decoding would,
// but for svcnet's own section egressMasquerade.
type kubeProxyConfiguration struct {
	EgressMasquerade struct {
		Enabled            *bool    `json:"enabled"`
		NonMasqueradeCIDRs []string `json:"nonMasqueradeCIDRs"`
		MasqLinkLocal      bool     `json:"masqLinkLocal"`
	} `json:"egressMasquerade"`

	APIVersion         string   `json:"apiVersion"`
	Kind               string   `json:"kind"`
	Mode               string   `json:"mode"`
	ClusterCIDR        string   `json:"clusterCIDR"`
	HealthzBindAddress string   `json:"healthzBindAddress"`
	MetricsBindAddress string   `json:"metricsBindAddress"`
	NodePortAddresses  []string `json:"nodePortAddresses"`
	NFTables           struct {
		MasqueradeBit *int32          `json:"masqueradeBit"`
		MasqueradeAll bool            `json:"masqueradeAll"`
		SyncPeriod    metav1.Duration `json:"syncPeriod"`
		MinSyncPeriod metav1.Duration `json:"minSyncPeriod"`
	} `json:"nftables"`
	Conntrack struct {
		MaxPerCore            *int32           `json:"maxPerCore"`
		Min                   *int32           `json:"min"`
		TCPEstablishedTimeout *metav1.Duration `json:"tcpEstablishedTimeout"`
		TCPCloseWaitTimeout   *metav1.Duration `json:"tcpCloseWaitTimeout"`
		TCPBeLiberal          bool             `json:"tcpBeLiberal"`
		UDPTimeout            metav1.Duration  `json:"udpTimeout"`
		UDPStreamTimeout      metav1.Duration  `json:"udpStreamTimeout"`
	} `json:"conntrack"`

	FeatureGates                any `json:"featureGates"`
	ClientConnection            any `json:"clientConnection"`
	Logging                     any `json:"logging"`
	HostnameOverride            any `json:"hostnameOverride"`
	BindAddress                 any `json:"bindAddress"`
	BindAddressHardFail         any `json:"bindAddressHardFail"`
	EnableProfiling             any `json:"enableProfiling"`
	ShowHiddenMetricsForVersion any `json:"showHiddenMetricsForVersion"`
	IPTables                    any `json:"iptables"`
	IPVS                        any `json:"ipvs"`
	Winkernel                   any `json:"winkernel"`
	DetectLocalMode             any `json:"detectLocalMode"`
	DetectLocal                 any `json:"detectLocal"`
	OOMScoreAdj                 any `json:"oomScoreAdj"`
	ConfigSyncPeriod            any `json:"configSyncPeriod"`
	PortRange                   any `json:"portRange"`
	WindowsRunAsService         any `json:"windowsRunAsService"`
}

// proxyConfigOf finds the file --config names in the container's mounts, checks
// it comes from ConfigMap configMap's proxy.yaml, and parses it.
func proxyConfigOf(t *testing.T, idx manifestIndex, spec corev1.PodSpec, c corev1.Container, configMap string) *kubeProxyConfiguration {
	var file string
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			file = v
		}
	}
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if path.Dir(file) == path.Clean(m.MountPath) {
			mount = &c.VolumeMounts[i]
		}
	}
	if file == "" || mount == nil {
		t.Errorf("--config=%q is not a file in any volume mount %+v", file, c.VolumeMounts)
		return nil
	}
	vi := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if vi < 0 || spec.Volumes[vi].ConfigMap == nil || spec.Volumes[vi].ConfigMap.Name != configMap {
		t.Errorf("--config=%s: volume %s is not ConfigMap %s", file, mount.Name, configMap)
		return nil
	}
	key := path.Base(file)
	if items := spec.Volumes[vi].ConfigMap.Items; len(items) > 0 {
		ii := slices.IndexFunc(items, func(it corev1.KeyToPath) bool { return it.Path == key })
		if ii < 0 {
			t.Errorf("--config=%s: ConfigMap volume %s has no item with path %s", file, mount.Name, key)
			return nil
		}
		key = items[ii].Key
	}
	if key != proxyConfigKey {
		t.Errorf("--config=%s is ConfigMap %s key %q, want %q", file, configMap, key, proxyConfigKey)
	}
	var cm corev1.ConfigMap
	if !idx.get(t, "ConfigMap", proxyNamespace, configMap, &cm) {
		return nil
	}
	data, ok := cm.Data[key]
	if !ok {
		t.Errorf("ConfigMap %s has no key %s", configMap, key)
		return nil
	}
	cfg := &kubeProxyConfiguration{}
	if err := yaml.UnmarshalStrict([]byte(data), cfg); err != nil {
		t.Errorf("ConfigMap %s %s: not a v1alpha1 KubeProxyConfiguration: %v", configMap, key, err)
		return nil
	}
	return cfg
}

// checkProxyConfig checks the values README.md documents.
func checkProxyConfig(t *testing.T, cfg *kubeProxyConfiguration, kubeProxyPorts bool) {
	if cfg.APIVersion != "kubeproxy.config.k8s.io/v1alpha1" || cfg.Kind != "KubeProxyConfiguration" {
		t.Errorf("proxy.yaml is %s %s, want kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration", cfg.APIVersion, cfg.Kind)
	}
	if cfg.Mode != "nftables" {
		t.Errorf("mode %q, want nftables", cfg.Mode)
	}
	cidrs := strings.Split(cfg.ClusterCIDR, ",")
	for _, s := range cidrs {
		if _, err := netip.ParsePrefix(strings.TrimSpace(s)); err != nil || len(cidrs) > 2 {
			t.Errorf("clusterCIDR %q: want one CIDR or a dual-stack pair: %v", cfg.ClusterCIDR, err)
		}
	}
	if !slices.Equal(cfg.NodePortAddresses, []string{"primary"}) {
		t.Errorf("nodePortAddresses %q, want [primary]", cfg.NodePortAddresses)
	}
	if cfg.NFTables.SyncPeriod.Duration != 30*time.Second || cfg.NFTables.MinSyncPeriod.Duration != time.Second {
		t.Errorf("nftables syncPeriod %v minSyncPeriod %v, want 30s 1s", cfg.NFTables.SyncPeriod.Duration, cfg.NFTables.MinSyncPeriod.Duration)
	}
	// Replacing kube-proxy: kube-proxy's conntrack settings (its init
	// container sets them); beside it: none, kube-proxy sets them.
	ct := cfg.Conntrack
	wantCT := "32768 131072 24h0m0s 1h0m0s"
	if !kubeProxyPorts {
		wantCT = "0 0 0s 0s"
	}
	if got := fmt.Sprintf("%s %s %s %s", fmtPtr(ct.MaxPerCore), fmtPtr(ct.Min), fmtDuration(ct.TCPEstablishedTimeout), fmtDuration(ct.TCPCloseWaitTimeout)); got != wantCT {
		t.Errorf("conntrack maxPerCore min tcpEstablishedTimeout tcpCloseWaitTimeout = %s, want %s", got, wantCT)
	}
	// Egress masquerade: on where svcnet replaces kube-proxy, off beside it
	// (svcnet takes only the Services labelled for it there).
	if eg := cfg.EgressMasquerade; eg.Enabled == nil || *eg.Enabled != kubeProxyPorts {
		t.Errorf("egressMasquerade.enabled %s, want %v", fmtPtr(eg.Enabled), kubeProxyPorts)
	}
	for _, s := range cfg.EgressMasquerade.NonMasqueradeCIDRs {
		if p, err := netip.ParsePrefix(s); err != nil || p != p.Masked() {
			t.Errorf("egressMasquerade.nonMasqueradeCIDRs %q: want a CIDR without host bits: %v", s, err)
		}
	}
	healthzHost, healthz := splitBind(t, "healthzBindAddress", cfg.HealthzBindAddress)
	metricsHost, metrics := splitBind(t, "metricsBindAddress", cfg.MetricsBindAddress)
	if healthzHost != "0.0.0.0" {
		t.Errorf("healthzBindAddress %q: want every address (0.0.0.0): the kubelet probes the node IP", cfg.HealthzBindAddress)
	}
	if a, err := netip.ParseAddr(metricsHost); err != nil || !a.IsLoopback() {
		t.Errorf("metricsBindAddress %q: want loopback only", cfg.MetricsBindAddress)
	}
	if kubeProxyPorts && (healthz != kubeProxyHealthz || metrics != kubeProxyMetrics) {
		t.Errorf("healthz port %d metrics port %d, want kube-proxy's %d %d", healthz, metrics, kubeProxyHealthz, kubeProxyMetrics)
	}
	if !kubeProxyPorts && (healthz == kubeProxyHealthz || metrics == kubeProxyMetrics || healthz == metrics) {
		t.Errorf("healthz port %d metrics port %d: beside kube-proxy, they must differ from kube-proxy's %d %d and each other", healthz, metrics, kubeProxyHealthz, kubeProxyMetrics)
	}
}

func splitBind(t *testing.T, field, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p <= 1024 || p > 65535 {
		t.Errorf("%s %q: want host:port with a port above 1024 (no NET_BIND_SERVICE)", field, addr)
		return "", 0
	}
	return host, p
}

// TestDeployProxyDryRun creates every object in deploy/proxy on a real
// kube-apiserver with server-side dry run and strict field validation: the
// apiserver's own defaulting, validation and admission must accept each one
// without a warning, and nothing is persisted. Then a Pod from each DaemonSet's
// template goes through Pod admission the same way.
func TestDeployProxyDryRun(t *testing.T) {
	ms := readProxyManifests(t)
	// --allow-privileged as on every kubeadm cluster (kube-proxy's own
	// DaemonSet is privileged): the proxy's init container is.
	dr := startDryRun(t, ms, proxyNamespace, kubetest.Options{APIServerFlags: []string{"--allow-privileged=true"}})
	dr.Create("the Secret README.md creates", memberlistSecretObject(t))
	if t.Failed() {
		return
	}
	idx := indexManifests(t, ms)
	for _, want := range proxyDaemonSets {
		var ds appsv1.DaemonSet
		if idx.get(t, "DaemonSet", proxyNamespace, want.name, &ds) {
			dryRunTemplatePod(t, dr, "DaemonSet", ds.ObjectMeta, ds.Spec.Template, "system-node-critical")
		}
	}
}

// memberlistSecretObject is the Secret README.md's command makes (kubectl
// create secret generic svcnet-memberlist --from-literal=secretkey=$(openssl
// rand -base64 32)), with a key from members.GenerateKey, which prints the
// same form; its value, as the kubelet mounts it, must be a key file svcnet
// proxy accepts.
func memberlistSecretObject(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	key, err := members.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := members.ParseKeys([]byte(key)); err != nil {
		t.Fatalf("the documented key form is not a key file: %v", err)
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: memberlistSecret, Namespace: proxyNamespace},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{memberlistKey: []byte(key)},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(secret)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}
