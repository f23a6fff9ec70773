package nodecluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// A node's holder gives the node's processes its hostname, a sysfs of its
// network namespace with the host's cgroups, its own /run, /var/lib, /var/log,
// /opt and CNI conf dir under its directory, and the kernel settings the
// kubelet wants, while the host keeps its own; it lives in its cgroup, and
// killing the cgroup ends it with nothing mounted in the host's namespace.
func TestHolder(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t, "holder")
	hier, v2, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	rel := fmt.Sprintf("svcnet.holdertest%d", os.Getpid())
	if err := makeCgroup([]string{v2}, rel); err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join(v2, rel)
	t.Cleanup(func() {
		if err := killCgroup(cg, killWait); err != nil {
			t.Error(err)
		}
		if err := removeCgroup(hier, rel, rmdirWait); err != nil {
			t.Error(err)
		}
	})
	hostPanic := readTrim(t, "/proc/sys/kernel/panic")
	hostPaths := []string{"/var/lib/kubelet", "/var/log/pods", "/etc/cni", "/run/containerd"}
	existed := map[string]bool{}
	for _, p := range hostPaths {
		_, err := os.Stat(p)
		existed[p] = err == nil
	}

	dir := t.TempDir()
	n := &node{Node: Node{Name: "node7", Addr: topology.NodeAddr(7), NetNS: ns.Name()}, dir: dir, cgroup: cg}
	if err := prepareNodeFS(dir, n.Node); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := startHolder(ctx, n, false, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	run := func(script string) string {
		t.Helper()
		a := nodeArgv(n.holder.pid, "/", "/bin/sh", "-c", script)
		out, err := exec.CommandContext(ctx, a[0], a[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("in the node: %s: %v: %s", script, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	fs := fsDir(dir)
	for _, tc := range []struct{ script, want string }{
		{"cat /proc/sys/kernel/hostname", "node7"},
		{"cat /etc/hostname", "node7"},
		{"ls /sys/class/net", "lo"}, // the throwaway namespace's, not the host's
		{"stat -f -c %T /run", "tmpfs"},
		{"stat -f -c %T /sys/fs/cgroup/unified", "cgroup2fs"},
		{"cat /proc/sys/kernel/panic /proc/sys/kernel/panic_on_oops /proc/sys/vm/overcommit_memory", "10\n1\n1"},
		{"(echo 0 > /proc/sys/kernel/panic_on_oops) 2>/dev/null || echo refused", "refused"},
		{"mkdir -p /var/lib/kubelet /var/log/pods /opt/cni/bin /run/containerd && touch /etc/cni/net.d/x && echo ok", "ok"},
		{"cat /etc/resolv.conf", "nameserver " + topology.Gateway.String()},
	} {
		if got := run(tc.script); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.script, got, tc.want)
		}
	}
	for _, p := range []string{"var-lib/kubelet", "var-log/pods", "opt/cni/bin", "cni-net.d/x"} {
		if _, err := os.Stat(filepath.Join(fs, p)); err != nil {
			t.Errorf("the node's file is not in its directory: %v", err)
		}
	}
	for _, p := range hostPaths {
		if _, err := os.Stat(p); err == nil && !existed[p] {
			t.Errorf("%s appeared on the host", p)
		}
	}
	if got := readTrim(t, "/proc/sys/kernel/panic"); got != hostPanic {
		t.Errorf("the host's kernel.panic changed: %s, was %s", got, hostPanic)
	}
	if pids, err := cgroupProcs(cg); err != nil || len(pids) != 1 || pids[0] != n.holder.pid {
		t.Errorf("cgroup holds %v (%v), want the holder %d", pids, err, n.holder.pid)
	}

	if err := killCgroup(cg, killWait); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.holder.done:
	case <-time.After(5 * time.Second):
		t.Fatal("holder still running after its cgroup was killed")
	}
	if ms, err := mountsUnder(dir); err != nil || len(ms) > 0 {
		t.Errorf("mounts under the node's dir in the host's namespace: %v %v", ms, err)
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
