package cni_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// runSvcnet runs the built binary with args and returns its output.
func runSvcnet(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, svcnetBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("svcnet %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// What a node gets from `svcnet cni install` works as the runtime uses it:
// the built binary, run as the init container runs it (copying itself), reads
// a dual-stack Node on a real apiserver (runtime containerd 1.6) and fills
// empty CNI directories; then cnitool, through exactly those directories,
// wires a pod (addresses of both pod CIDRs, a 1.0.0 result, TCP to the node
// at the pod's gateway) and the installed loopback brings the pod's lo up; after DEL,
// `svcnet cni uninstall` removes the installed files and nothing else.
func TestInstalledPlugin(t *testing.T) {
	tool := needTools(t)
	kube := kubetest.Start(t, kubetest.Options{})
	kubetest.CreateNode(t, kube.Client, kubetest.Node{Name: "node1", InternalIPs: []string{node4},
		PodCIDRs: []string{podCIDR4, podCIDR6}, Ready: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := kube.Client.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://1.6.20"
	if _, err := kube.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	bin, conf := filepath.Join(dir, "opt", "cni", "bin"), filepath.Join(dir, "etc", "cni", "net.d")
	out := runSvcnet(t, "cni", "install", "--kubeconfig", kube.Kubeconfig, "--node-name", "node1",
		"--cni-bin-dir", bin, "--cni-conf-dir", conf)
	if !strings.Contains(out, "cniVersion 1.0.0") {
		t.Errorf("install output:\n%s", out)
	}
	self, err := os.ReadFile(svcnetBin)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(bin, "svcnet")); err != nil || !slices.Equal(got, self) {
		t.Fatalf("installed svcnet is not the running binary (%d bytes, %v)", len(got), err)
	}

	e := &env{t: t, tool: tool, node: netnstest.New(t, "cninode"), netDir: conf, binDir: bin,
		varLib: filepath.Join(dir, "var-lib")}
	e.dataDir = filepath.Join(e.varLib, "cni", "networks", network) // the conflist's default dataDir, under the private /var/lib
	if err := os.MkdirAll(e.varLib, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := netnstest.New(t, "cnipod")
	res, err := e.cnitool("add", pod, "")
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		CNIVersion string `json:"cniVersion"`
	}
	r, err := types100.NewResult([]byte(res))
	if json.Unmarshal([]byte(res), &head) != nil || head.CNIVersion != "1.0.0" || err != nil {
		t.Fatalf("ADD result %s: %v; want a 1.0.0 result", res, err)
	}
	result := r.(*types100.Result)
	if a, b := podIP(t, result, false).String(), podIP(t, result, true).String(); a != "192.168.1.2" || b != "fd00:192:168:1::2" {
		t.Errorf("pod addresses %s %s", a, b)
	}
	serveWho(t, e.node, 8080)
	if who, err := askTCP(pod, "192.168.1.1:8080"); err != nil || who != "192.168.1.2" {
		t.Errorf("pod -> node at its gateway: %q, %v", who, err)
	}

	// The runtime's loopback call, through the installed loopback.
	lo := `{"cniVersion":"1.0.0","name":"cni-loopback","plugins":[{"type":"loopback"}]}`
	loConf := filepath.Join(conf, "99-loopback.conflist")
	if err := os.WriteFile(loConf, []byte(lo), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, pod, "ip", "link", "set", "lo", "down")
	if _, err := e.cnitoolNet("add", "cni-loopback", pod, ""); err != nil {
		t.Fatal(err)
	}
	if s := sh(t, pod, "ip", "link", "show", "lo"); !strings.Contains(s, ",UP") {
		t.Errorf("lo not up after the installed loopback's ADD: %s", s)
	}
	for _, network := range []string{"cni-loopback", network} {
		if _, err := e.cnitoolNet("del", network, pod, ""); err != nil {
			t.Errorf("del %s: %v", network, err)
		}
	}

	out = runSvcnet(t, "cni", "uninstall", "--cni-bin-dir", bin, "--cni-conf-dir", conf)
	var left []string
	for _, d := range []string{bin, conf} {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, ent := range ents {
			left = append(left, filepath.Join(d, ent.Name()))
		}
	}
	if !slices.Equal(left, []string{loConf}) {
		t.Errorf("after uninstall %q, want only the test's %s\n%s", left, loConf, out)
	}
}
