package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// invalidPodScenarios: Pods the apiserver would refuse are refused whole by
// `lab apply`, on either control plane: an error naming the user's file and
// the field, and nothing made for them: no network namespace, no /etc/netns
// files, no CNI state (no address taken), no process, no entry in `lab get`.
// The valid Pod applied beside them runs.
func invalidPodScenarios(t *testing.T, e *env) {
	names := e.l.Names()
	pod := func(ns, name string, port int32) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "refuse"}},
			Spec: corev1.PodSpec{NodeName: "node2", Containers: []corev1.Container{{Name: "c", Image: "svcnet-echo",
				Ports: []corev1.ContainerPort{{ContainerPort: port}}}}}}
	}
	cases := []struct {
		obj  *corev1.Pod
		want string
	}{
		{pod("default", "под", 80), `invalid.yaml#1: Pod default/под: metadata.name: Invalid value: "под"`},
		{pod("pod.default", "b", 80), `invalid.yaml#2: Pod pod.default/b: metadata.namespace: Invalid value: "pod.default"`},
		{pod("default", "bad-port", 70000), `invalid.yaml#3: Pod default/bad-port: spec.containers[0].ports[0].containerPort: Invalid value: 70000`},
	}
	nsBefore := labNamespaces(t, names.Lab)
	cniBefore := treeState(t, names.Path("cni"))
	var objs []controlplane.Object
	for i, c := range cases {
		objs = append(objs, controlplane.Object{Origin: "invalid.yaml#" + string(rune('1'+i)), Obj: c.obj})
	}
	good := pod("default", "refuse-ok", 80)
	objs = append(objs, controlplane.Object{Origin: "invalid.yaml#4", Obj: good})
	errs := e.l.Apply(e.ctx, objs)
	if len(errs) != len(cases) {
		t.Fatalf("apply: %d errors, want %d: %v", len(errs), len(cases), errs)
	}
	for i, c := range cases {
		if got := errs[i].Error(); !strings.HasPrefix(got, c.want) {
			t.Errorf("apply: error %q, want it to start with %q", got, c.want)
		}
	}
	e.pod("refuse-ok") // the valid one was applied and runs
	want := append(slices.Clone(nsBefore), names.Pod("default", "refuse-ok"))
	slices.Sort(want)
	if got := labNamespaces(t, names.Lab); !slices.Equal(got, want) {
		t.Errorf("network namespaces after the apply: %q, want %q", got, want)
	}
	r, err := e.l.Get(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Pods {
		if p.Name == "под" || p.Namespace == "pod.default" || p.Name == "bad-port" {
			t.Errorf("lab get lists the refused pod %s/%s", p.Namespace, p.Name)
		}
	}
	for _, c := range cases {
		if dir := filepath.Join(topology.EtcNetns, names.Pod(c.obj.Namespace, c.obj.Name)); fileExists(dir) {
			t.Errorf("%s exists for a refused pod", dir)
		}
	}
	// The CNI state changed by the one valid pod only, and is as it was once
	// that pod is gone (but for the IPAM store's round-robin cursor).
	if err := e.l.Delete(e.ctx, "Pod", "default", "refuse-ok", 0); err != nil {
		t.Fatal(err)
	}
	d := diffStates(cniBefore, treeState(t, names.Path("cni")))
	d = slices.DeleteFunc(d, func(s string) bool { return strings.Contains(s, "/last_reserved_ip.") })
	if len(d) > 0 {
		t.Errorf("the CNI state changed after refusals and one pod added and deleted:\n%s", strings.Join(d, "\n"))
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
