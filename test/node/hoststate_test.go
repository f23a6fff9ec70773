package node

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
)

// hostPaths are the fixed paths a node's containerd, runc, kubelet and CNI
// plugin use; each node has its own (internal/nodecluster mounts.go), so none
// may appear on the host.
var hostPaths = []string{
	"/run/containerd", "/run/netns/cni-", "/run/nri", "/run/runc", "/var/run/containerd",
	"/var/lib/kubelet", "/var/lib/containerd", "/var/lib/cni", "/var/log/pods", "/var/log/containers",
	"/etc/cni", "/etc/kubernetes", "/opt/cni", "/opt/containerd",
}

// hostSysctls are the global kernel settings a kubelet would write with
// protectKernelDefaults: false.
var hostSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// hostState is what a node cluster must leave as it found it in the host's
// namespaces: addresses, routes, rules and the nftables ruleset of the host's
// network namespace, the mounts of the host's mount namespace (but those of
// named network namespaces, which other tests on the machine make and remove),
// the global kernel settings, and which of hostPaths exist (a
// "/run/netns/cni-" entry stands for any namespace of that prefix).
func hostState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(netnstest.HostNetworkState(t))
	mounts, err := procfs.GetMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if !strings.HasPrefix(m.MountPoint, "/run/netns/") {
			fmt.Fprintf(&b, "mount %s %s %s\n", m.MountPoint, m.FSType, m.Source)
		}
	}
	for _, k := range hostSysctls {
		v, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s = %s", k, v)
	}
	for _, p := range hostPaths {
		if strings.HasSuffix(p, "-") {
			entries, _ := os.ReadDir("/run/netns")
			for _, e := range entries {
				if strings.HasPrefix("/run/netns/"+e.Name(), p) {
					fmt.Fprintf(&b, "exists: /run/netns/%s\n", e.Name())
				}
			}
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			fmt.Fprintf(&b, "exists: %s\n", p)
		}
	}
	return b.String()
}

// checkHostState fails t where the host's state differs from before.
func checkHostState(t *testing.T, before string) {
	t.Helper()
	if after := hostState(t); after != before {
		t.Errorf("the host's state changed:\n--- before\n%s\n--- after\n%s", before, after)
	}
}

// checkClusterGone fails t for what of cluster name (state directory dir) is
// left after what (nodetest.CheckGone), and for each of pids (the cluster's
// processes, listed before) that still runs.
func checkClusterGone(t *testing.T, name, dir string, pids []int, after string) {
	t.Helper()
	nodetest.CheckGone(t, name, dir, after)
	for _, p := range pids {
		if c := commOf(p); c != "" {
			t.Errorf("process %d (%s) of the cluster still runs after %s", p, c, after)
		}
	}
}
