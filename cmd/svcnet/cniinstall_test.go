package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/cni/cnitest"
	"github.com/svcnet/svcnet/internal/cni/install"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/logtest"
)

// cniNode is a node's CNI directories under a test's directory, and the
// binary to install.
type cniNode struct {
	root, bin, conf, source string
}

func newCNINode(t *testing.T) cniNode {
	t.Helper()
	root := t.TempDir()
	n := cniNode{root: root, bin: filepath.Join(root, "opt", "cni", "bin"), conf: filepath.Join(root, "etc", "cni", "net.d"),
		source: filepath.Join(root, "image", "svcnet")}
	for _, d := range []string{n.bin, n.conf, filepath.Dir(n.source)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(n.source, []byte("svcnet binary under test"), 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n cniNode) args(kubeconfig, node string, extra ...string) []string {
	return append([]string{"cni", "install", "--kubeconfig", kubeconfig, "--node-name", node,
		"--cni-bin-dir", n.bin, "--cni-conf-dir", n.conf, "--source", n.source}, extra...)
}

// files lists every file under the node's root, relative, sorted.
func (n cniNode) files(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(n.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(n.root, p)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func setRuntimeVersion(t *testing.T, env *kubetest.Env, node, version string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.ContainerRuntimeVersion = version
	if _, err := env.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCNIInstallKube (kube tier): `svcnet cni install` reads a dual-stack
// Node from a real apiserver and installs the plugin, loopback and the
// conflist in the version its runtime takes; a second run writes nothing;
// `svcnet cni uninstall` removes exactly what was installed.
func TestCNIInstallKube(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	kubetest.CreateNode(t, env.Client, kubetest.Node{Name: "node1", InternalIPs: []string{"172.26.236.177"},
		PodCIDRs: []string{"192.168.1.0/24", "fd00:192:168:1::/64"}, Ready: true})
	setRuntimeVersion(t, env, "node1", "containerd://1.6.20")
	n := newCNINode(t)
	foreign := filepath.Join(n.conf, "99-other.conflist")
	if err := os.WriteFile(foreign, []byte(`{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"bridge"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := run(t, n.args(env.Kubeconfig, "node1")...)
	if code != 0 {
		t.Fatalf("install: exit %d: %s", code, errOut)
	}
	conf := filepath.Join(n.conf, "10-svcnet.conflist")
	for _, want := range []string{"node node1: cniVersion 1.0.0 (containerd 1.6 parses CNI results up to 1.0.0)",
		"wrote " + filepath.Join(n.bin, "svcnet"), "wrote " + filepath.Join(n.bin, "loopback"), "wrote " + conf} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	list, err := libcni.ConfListFromFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	var plugin struct {
		Subnets []string `json:"subnets"`
	}
	if err := json.Unmarshal(list.Plugins[0].Bytes, &plugin); err != nil {
		t.Fatal(err)
	}
	if list.CNIVersion != "1.0.0" || list.Name != "svcnet" || list.Plugins[0].Network.Type != "svcnet" ||
		!slices.Equal(plugin.Subnets, []string{"192.168.1.0/24", "fd00:192:168:1::/64"}) {
		t.Errorf("conflist %s", list.Bytes)
	}
	for _, p := range []string{"svcnet", "loopback"} {
		if b, err := os.ReadFile(filepath.Join(n.bin, p)); err != nil || string(b) != "svcnet binary under test" {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
	want := []string{"etc/cni/net.d/10-svcnet.conflist", "etc/cni/net.d/99-other.conflist", "etc/cni/net.d/svcnet-cni.installed",
		"image/svcnet", "opt/cni/bin/loopback", "opt/cni/bin/svcnet"}
	if got := n.files(t); !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}

	// Again: nothing is written.
	before := cnitest.Snapshot(t, n.root)
	inodes := map[string]uint64{}
	for _, f := range want {
		inodes[f] = cnitest.Inode(t, filepath.Join(n.root, f))
	}
	out, errOut, code = run(t, n.args(env.Kubeconfig, "node1")...)
	if code != 0 || strings.Contains(out, "wrote") {
		t.Fatalf("second install: exit %d: %s%s", code, out, errOut)
	}
	if d := before.Diff(cnitest.Snapshot(t, n.root)); len(d) > 0 {
		t.Errorf("second install changed:\n%s", strings.Join(d, "\n"))
	}
	for f, ino := range inodes {
		if cnitest.Inode(t, filepath.Join(n.root, f)) != ino {
			t.Errorf("%s: inode changed", f)
		}
	}

	// A file of another plugin's beside ours stays; ours go.
	other := filepath.Join(n.bin, "bridge")
	if err := os.WriteFile(other, []byte("bridge plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, "cni", "uninstall", "--cni-bin-dir", n.bin, "--cni-conf-dir", n.conf)
	if code != 0 {
		t.Fatalf("uninstall: exit %d: %s", code, errOut)
	}
	if want := []string{"etc/cni/net.d/99-other.conflist", "image/svcnet", "opt/cni/bin/bridge"}; !slices.Equal(n.files(t), want) {
		t.Errorf("after uninstall %v, want %v (output:\n%s)", n.files(t), want, out)
	}
}

// The runtime decides the version: containerd 2 takes 1.1.0; the flag
// overrides.
func TestCNIInstallVersionKube(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	kubetest.CreateNode(t, env.Client, kubetest.Node{Name: "node2", PodCIDRs: []string{"fd00:192:168:2::/64"}, Ready: true})
	setRuntimeVersion(t, env, "node2", "containerd://2.4.2")
	for _, tc := range []struct {
		flag, want string
	}{{"auto", `"cniVersion": "1.1.0"`}, {"1.0.0", `"cniVersion": "1.0.0"`}} {
		n := newCNINode(t)
		if _, errOut, code := run(t, n.args(env.Kubeconfig, "node2", "--cni-version", tc.flag)...); code != 0 {
			t.Fatalf("--cni-version %s: exit %d: %s", tc.flag, code, errOut)
		}
		b, err := os.ReadFile(filepath.Join(n.conf, "10-svcnet.conflist"))
		if err != nil || !strings.Contains(string(b), tc.want) || !strings.Contains(string(b), `"fd00:192:168:2::/64"`) {
			t.Errorf("--cni-version %s: conflist %s, %v; want %s", tc.flag, b, err, tc.want)
		}
	}
}

// A Node without a pod CIDR: the install waits, bounded, then fails naming
// the Node and the reason, and writes nothing. One that gets its CIDR while
// the install waits is installed.
func TestCNIInstallWaitsForPodCIDRKube(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	kubetest.CreateNode(t, env.Client, kubetest.Node{Name: "node3", Ready: true})
	n := newCNINode(t)
	start := time.Now()
	_, errOut, code := run(t, n.args(env.Kubeconfig, "node3", "--pod-cidr-timeout", "3s")...)
	took := time.Since(start)
	if code == 0 || !strings.Contains(errOut, "node node3: no pod CIDR (spec.podCIDRs is empty) after waiting 3s") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	if took < 3*time.Second || took > 30*time.Second {
		t.Errorf("gave up after %v, want about 3s", took)
	}
	if got := n.files(t); !slices.Equal(got, []string{"image/svcnet"}) {
		t.Errorf("files %v: a failed install wrote something", got)
	}

	_, errOut, code = run(t, n.args(env.Kubeconfig, "nonexistent", "--pod-cidr-timeout", "1s")...)
	if code == 0 || !strings.Contains(errOut, `node nonexistent: nodes "nonexistent" not found (gave up after 1s)`) {
		t.Errorf("missing Node: exit %d: %s", code, errOut)
	}

	done := make(chan struct{})
	var out, stderr bytes.Buffer
	var exitErr error
	go func() {
		defer close(done)
		cmd := newRootCommand()
		cmd.SetArgs(n.args(env.Kubeconfig, "node3", "--pod-cidr-timeout", "2m"))
		cmd.SetOut(&out)
		cmd.SetErr(&stderr)
		exitErr = cmd.ExecuteContext(context.Background())
	}()
	time.Sleep(time.Second)
	patch := []byte(`{"spec":{"podCIDR":"10.244.3.0/24","podCIDRs":["10.244.3.0/24"]}}`)
	if _, err := env.Client.CoreV1().Nodes().Patch(context.Background(), "node3", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("install did not finish within 90s of the Node getting its pod CIDR")
	}
	if exitErr != nil {
		t.Fatalf("install: %v\n%s", exitErr, stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(n.conf, "10-svcnet.conflist")); err != nil || !strings.Contains(string(b), `"10.244.3.0/24"`) {
		t.Errorf("conflist %s, %v", b, err)
	}
}

// With --watch the install stays and puts back what someone removed; it
// removes nothing when it stops.
func TestCNIInstallWatchKube(t *testing.T) {
	env := kubetest.Start(t, kubetest.Options{})
	kubetest.CreateNode(t, env.Client, kubetest.Node{Name: "node4", PodCIDRs: []string{"10.244.4.0/24"}, Ready: true})
	n := newCNINode(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	var out, stderr logtest.Buffer
	go func() {
		cmd := newRootCommand()
		cmd.SetArgs(n.args(env.Kubeconfig, "node4", "--watch", "--resync-period", "200ms"))
		cmd.SetOut(&out)
		cmd.SetErr(&stderr)
		done <- cmd.ExecuteContext(ctx)
	}()
	conf := filepath.Join(n.conf, "10-svcnet.conflist")
	exists := func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("install --watch exited: %v\n%s", err, stderr.String())
		default:
		}
		_, err := os.Stat(conf)
		return err == nil, fmt.Sprintf("conflist: %v", err)
	}
	kubetest.Eventually(t, 60*time.Second, "the first install", exists)
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the conflist put back", exists)
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("install --watch: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("install --watch did not stop with its context")
	}
	if _, err := os.Stat(conf); err != nil {
		t.Errorf("stopping removed the conflist: %v", err)
	}
	if strings.Count(out.String(), "wrote "+conf) != 2 {
		t.Errorf("output:\n%s\nwant the conflist written twice", out.String())
	}
	if _, err := os.Stat(filepath.Join(n.conf, install.ManifestName)); err != nil {
		t.Errorf("manifest: %v", err)
	}
}

// TestCNIDeployArgs: deploy/cni/daemonset.yaml's command lines parse with
// `svcnet cni install`'s own flags, and the directories the containers mount
// are the ones the command writes to.
func TestCNIDeployArgs(t *testing.T) {
	b, err := os.ReadFile("../../deploy/cni/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(b, &ds); err != nil {
		t.Fatalf("daemonset.yaml: %v", err)
	}
	spec := ds.Spec.Template.Spec
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		argv := append(slices.Clone(c.Command), c.Args...)
		if len(argv) < 3 || !slices.Equal(argv[:3], []string{"svcnet", "cni", "install"}) {
			t.Errorf("container %s: command %q, want svcnet cni install ...", c.Name, argv)
			continue
		}
		cmd := newCNIInstallCommand()
		if err := cmd.ParseFlags(argv[3:]); err != nil {
			t.Errorf("container %s: flags %q: %v", c.Name, argv[3:], err)
			continue
		}
		if rest := cmd.Flags().Args(); len(rest) > 0 {
			t.Errorf("container %s: arguments %q, which the command refuses", c.Name, rest)
		}
		var mounts []string
		for _, m := range c.VolumeMounts {
			mounts = append(mounts, m.MountPath)
		}
		for _, flag := range []string{"cni-bin-dir", "cni-conf-dir"} {
			if dir := cmd.Flags().Lookup(flag).Value.String(); !slices.Contains(mounts, dir) {
				t.Errorf("container %s: --%s %s is not mounted (mounts %q)", c.Name, flag, dir, mounts)
			}
		}
	}
}
