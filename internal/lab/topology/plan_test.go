package topology

import (
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/cgroup"
)

func TestPlan(t *testing.T) {
	for i, want := range map[int]string{1: "172.26.236.177", 3: "172.26.236.179", 4: "172.26.236.200", MaxNodes: "172.26.236.253"} {
		if got := NodeAddr(i).String(); got != want {
			t.Errorf("NodeAddr(%d) = %s, want %s", i, got, want)
		}
	}
	if got := PodCIDR(2).String(); got != "192.168.2.0/24" {
		t.Errorf("PodCIDR(2) = %s", got)
	}
	if got := Gateway4(2).String(); got != "192.168.2.1" {
		t.Errorf("Gateway4(2) = %s", got)
	}
	for name, want := range map[string]int{"node1": 1, "node12": 12, "node": 0, "node01": 0, "client": 0, "node-1": 0} {
		if got := NodeIndex(name); got != want {
			t.Errorf("NodeIndex(%q) = %d, want %d", name, got, want)
		}
	}
	for _, ok := range []string{"svcnet", "e2e123-kube", "a"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "-a", "A", "a_b", "abcdefghijabcdefghijabcdefghijabc"} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("ValidateName(%q) accepted", bad)
		}
	}
	n := Names{Lab: "x"}
	if !n.Owns(n.Pod("default", "p")) || !n.Owns(n.Node(1)) || (Names{Lab: "x-2"}).Owns(n.Node(1)) || n.Owns("x-2.node1") {
		t.Error("Owns must tell one lab's namespaces from another's")
	}
}

func TestCgroupNames(t *testing.T) {
	n := Names{Lab: "e2e-1"}
	if got, err := n.Cgroup("/sys/fs/cgroup/unified"); err != nil || got != "/sys/fs/cgroup/unified/svcnet-lab-e2e-1" {
		t.Errorf("Cgroup = %q, %v", got, err)
	}
	if got, err := n.NodeCgroup("/sys/fs/cgroup", 3); err != nil || got != "/sys/fs/cgroup/svcnet-lab-e2e-1/node3" {
		t.Errorf("NodeCgroup = %q, %v", got, err)
	}
	for _, i := range []int{0, -1, MaxNodes + 1} {
		if got, err := n.NodeCgroup("/sys/fs/cgroup", i); err == nil {
			t.Errorf("NodeCgroup(%d) = %q, want an error", i, got)
		}
	}
	// A name from a user reaches no path unchecked.
	for _, bad := range []string{"", "..", "../x", "a/b", "a.b", "cgroup.procs", "A", "-a", strings.Repeat("a", 33)} {
		n := Names{Lab: bad}
		if got, err := n.Cgroup("/sys/fs/cgroup"); err == nil {
			t.Errorf("Cgroup for lab %q = %q, want an error", bad, got)
		}
		if got, err := n.NodeCgroup("/sys/fs/cgroup", 1); err == nil {
			t.Errorf("NodeCgroup for lab %q = %q, want an error", bad, got)
		}
	}
}

// A node's cgroup v2 path names its directory under any mount of the
// hierarchy.
func TestNodeCgroupPath(t *testing.T) {
	n := Names{Lab: "e2e-1"}
	if got := n.NodeCgroupPath(2); got != "/svcnet-lab-e2e-1/node2" {
		t.Errorf("NodeCgroupPath = %q", got)
	}
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/run/svcnet/cgroup2"} {
		dir, err := n.NodeCgroup(root, 2)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := cgroup.Path(root, dir); err != nil || p != n.NodeCgroupPath(2) {
			t.Errorf("cgroup.Path(%s, %s) = %q, %v; want %q", root, dir, p, err, n.NodeCgroupPath(2))
		}
		if err := cgroup.CheckPath(n.NodeCgroupPath(2)); err != nil {
			t.Error(err)
		}
	}
}
