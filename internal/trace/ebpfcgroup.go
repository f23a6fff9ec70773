package trace

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/cgroup"
	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/netns"
)

// nodeCgroup returns the cgroup v2 directory node's socket load balancer is
// attached to: Network.Cgroups' entry when given, else the one of the
// svcnet proxy --data-plane ebpf running in the node's network namespace
// (Network.NetNS), as its command line names it (proxyCgroup).
func nodeCgroup(net *Network, node string) (string, error) {
	if dir := net.Cgroups[node]; dir != "" {
		return dir, nil
	}
	name := net.NetNS[node]
	if name == "" {
		return "", fmt.Errorf("node %s: its cgroup is unknown (give --cgroup %s=DIR) and so is its network namespace, where its svcnet proxy would say", node, node)
	}
	pids, err := netns.PidsIn(filepath.Join(netns.RunDir, name))
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	var found []string
	for _, pid := range pids {
		argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // exited
		}
		dir, ok := proxyCgroup(pid, strings.Split(string(bytes.TrimRight(argv, "\x00")), "\x00"))
		if !ok {
			continue
		}
		if dir == "" {
			if dir, err = cgroup.Root(); err != nil {
				return "", fmt.Errorf("node %s: svcnet proxy (pid %d) attaches to the cgroup v2 root: %w", node, pid, err)
			}
		}
		found = append(found, dir)
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("node %s: no svcnet proxy --data-plane %s runs in its network namespace %s (give --cgroup %s=DIR)", node, ebpfplane.Name, name, node)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("node %s: %d svcnet proxy --data-plane %s processes run in its network namespace %s (give --cgroup %s=DIR)", node, len(found), ebpfplane.Name, name, node)
}

// proxyCgroup reads the command line argv of process pid: ok when it is
// svcnet proxy running the eBPF plane, with the cgroup directory its
// --cgroup names as the tracer can open it ("" when none is given: the
// cgroup v2 root). A path under /proc/self/ is the proxy's own (a
// descriptor it was handed), so it is read through /proc/PID/; a relative
// one from its working directory, an absolute one in its mount namespace
// (/proc/PID/root).
func proxyCgroup(pid int, argv []string) (dir string, ok bool) {
	if len(argv) < 2 || filepath.Base(argv[0]) != "svcnet" || argv[1] != "proxy" {
		return "", false
	}
	plane, cg := "", ""
	for i := 2; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		for _, f := range []struct {
			name string
			to   *string
		}{{"--data-plane", &plane}, {"--cgroup", &cg}} {
			switch {
			case a == f.name && i+1 < len(argv):
				i++
				*f.to = argv[i]
			case strings.HasPrefix(a, f.name+"="):
				*f.to = strings.TrimPrefix(a, f.name+"=")
			}
		}
	}
	if plane != ebpfplane.Name {
		return "", false
	}
	p := "/proc/" + strconv.Itoa(pid)
	switch {
	case cg == "":
		return "", true
	case strings.HasPrefix(cg, "/proc/self/"):
		return p + strings.TrimPrefix(cg, "/proc/self"), true
	case !filepath.IsAbs(cg):
		return filepath.Join(p, "cwd", cg), true
	}
	return filepath.Join(p, "root", cg), true
}
