package kube

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// deployCNIDir holds the manifests that install svcnet's CNI plugin on every
// node.
const deployCNIDir = "../../deploy/cni"

// The objects deploy/cni must contain, and the properties the tests below hold
// them to.
const (
	cniNamespace = "kube-system"
	cniName      = "svcnet-cni" // DaemonSet, ServiceAccount, ClusterRole(Binding)
	cniImage     = "ghcr.io/svcnet/svcnet:latest"
)

// cniHostPaths are the only host paths the Pods mount: the runtime's CNI bin
// and conf dirs, at the same paths inside (the command's defaults), writable.
var cniHostPaths = []string{"/etc/cni/net.d", "/opt/cni/bin"}

// TestDeployCNIManifests holds deploy/cni to what its README and comments
// promise, without an apiserver: kustomization.yaml lists every file; the
// objects live in kube-system; RBAC is get on nodes only; the DaemonSet runs
// on every node's host network, installs in an init container and keeps the
// files with --watch in its one container, unprivileged, with no capability
// and no host path but the two CNI directories.
func TestDeployCNIManifests(t *testing.T) {
	ms := readObjects(t, deployCNIDir)
	checkKustomization(t, deployCNIDir)
	idx := indexManifests(t, ms)
	checkNamespace(t, ms, cniNamespace)
	var sa corev1.ServiceAccount
	idx.get(t, "ServiceAccount", cniNamespace, cniName, &sa)
	var role rbacv1.ClusterRole
	if idx.get(t, "ClusterRole", "", cniName, &role) {
		checkClusterRole(t, &role, map[string][]string{"/nodes": {"get"}})
	}
	checkClusterRoleBinding(t, idx, cniName, cniNamespace, cniName)
	var ds appsv1.DaemonSet
	if idx.get(t, "DaemonSet", cniNamespace, cniName, &ds) {
		checkCNIDaemonSet(t, &ds)
	}
}

func checkCNIDaemonSet(t *testing.T, ds *appsv1.DaemonSet) {
	spec := ds.Spec.Template.Spec
	checkSelector(t, ds.Spec.Selector, ds.Spec.Template.Labels)
	// The network plugin cannot need the network it installs, and must run
	// on NotReady and tainted nodes.
	if !spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("hostNetwork %v hostPID %v hostIPC %v, want true false false", spec.HostNetwork, spec.HostPID, spec.HostIPC)
	}
	if !slices.Contains(spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists}) {
		t.Errorf("tolerations %+v: none tolerates every taint", spec.Tolerations)
	}
	if spec.PriorityClassName != "system-node-critical" || spec.ServiceAccountName != cniName {
		t.Errorf("priorityClassName %q serviceAccountName %q, want system-node-critical %s", spec.PriorityClassName, spec.ServiceAccountName, cniName)
	}
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		t.Fatalf("%d init containers, %d containers: want one of each", len(spec.InitContainers), len(spec.Containers))
	}
	for _, c := range []struct {
		c    corev1.Container
		argv []string
	}{
		{spec.InitContainers[0], []string{"svcnet", "cni", "install"}},
		{spec.Containers[0], []string{"svcnet", "cni", "install", "--watch"}},
	} {
		t.Run(c.c.Name, func(t *testing.T) {
			checkImage(t, c.c, cniImage)
			if argv := append(slices.Clone(c.c.Command), c.c.Args...); !slices.Equal(argv, c.argv) {
				t.Errorf("command %q, want %q", argv, c.argv)
			}
			i := slices.IndexFunc(c.c.Env, func(e corev1.EnvVar) bool { return e.Name == "NODE_NAME" })
			if i < 0 || c.c.Env[i].ValueFrom == nil || c.c.Env[i].ValueFrom.FieldRef == nil || c.c.Env[i].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
				t.Errorf("env %+v: want NODE_NAME from fieldRef spec.nodeName", c.c.Env)
			}
			checkCNISecurity(t, c.c.SecurityContext)
			checkCNIMounts(t, spec, c.c)
		})
	}
}

// checkCNISecurity: not privileged, no escalation, read-only root
// filesystem (checkUnprivileged), every capability dropped and none added,
// UID 0 (the owner of the host's CNI directories).
func checkCNISecurity(t *testing.T, sc *corev1.SecurityContext) {
	checkUnprivileged(t, sc)
	if sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities %+v, want drop ALL, add none", sc.Capabilities)
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("runAsUser %s, want 0", fmtPtr(sc.RunAsUser))
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %+v, want RuntimeDefault", sc.SeccompProfile)
	}
}

// checkCNIMounts: the container mounts exactly the two host directories,
// each at its own path, and the Pod has no other volume.
func checkCNIMounts(t *testing.T, spec corev1.PodSpec, c corev1.Container) {
	var got []string
	for _, m := range c.VolumeMounts {
		vi := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if vi < 0 || spec.Volumes[vi].HostPath == nil {
			t.Errorf("volumeMount %s: not a hostPath volume", m.Name)
			continue
		}
		hp := spec.Volumes[vi].HostPath
		if hp.Path != m.MountPath || m.ReadOnly || m.SubPath != "" || hp.Type == nil || *hp.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("volumeMount %s: host %s (type %s) at %s readOnly %v subPath %q, want the same path, writable, DirectoryOrCreate",
				m.Name, hp.Path, fmtPtr(hp.Type), m.MountPath, m.ReadOnly, m.SubPath)
		}
		got = append(got, hp.Path)
	}
	if slices.Sort(got); !slices.Equal(got, cniHostPaths) || len(spec.Volumes) != len(cniHostPaths) {
		t.Errorf("host paths %q (%d volumes), want exactly %q", got, len(spec.Volumes), cniHostPaths)
	}
}

// TestDeployCNIDryRun creates every object in deploy/cni on a real
// kube-apiserver with server-side dry run and strict field validation, then
// a Pod from the DaemonSet's template, which Pod admission must accept with
// system-node-critical's priority.
func TestDeployCNIDryRun(t *testing.T) {
	ms := readObjects(t, deployCNIDir)
	dr := startDryRun(t, ms, cniNamespace, kubetest.Options{})
	if t.Failed() {
		return
	}
	var ds appsv1.DaemonSet
	if indexManifests(t, ms).get(t, "DaemonSet", cniNamespace, cniName, &ds) {
		dryRunTemplatePod(t, dr, "DaemonSet", ds.ObjectMeta, ds.Spec.Template, "system-node-critical")
	}
}
