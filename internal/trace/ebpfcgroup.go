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
// attached to: that of the cgroup path Network.Cgroups gives for it, else
// of the --cgroup of the svcnet proxy --data-plane ebpf running in the
// node's network namespace (Network.NetNS), in the cgroup2 hierarchy the
// tracer's mount namespace has.
func nodeCgroup(net *Network, node string) (string, error) {
	p, err := nodeCgroupPath(net, node)
	if err != nil {
		return "", err
	}
	root, err := cgroup.Root()
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	return filepath.Join(root, p), nil
}

// nodeCgroupPath returns the cgroup v2 path of node's socket load
// balancer.
func nodeCgroupPath(net *Network, node string) (string, error) {
	if p := net.Cgroups[node]; p != "" {
		if err := cgroup.CheckPath(p); err != nil {
			return "", fmt.Errorf("node %s: %w", node, err)
		}
		return p, nil
	}
	name := net.NetNS[node]
	if name == "" {
		return "", fmt.Errorf("node %s: its cgroup is unknown (give --cgroup %s=PATH) and so is its network namespace, where its svcnet proxy would say", node, node)
	}
	argvs, err := proxyArgvs(net, node)
	if err != nil {
		return "", err
	}
	var found []string
	for _, argv := range argvs {
		if p, ok := proxyCgroup(argv); ok {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("node %s: no svcnet proxy --data-plane %s runs in its network namespace %s (give --cgroup %s=PATH)", node, ebpfplane.Name, name, node)
	case 1:
		if err := cgroup.CheckPath(found[0]); err != nil {
			return "", fmt.Errorf("node %s: svcnet proxy --cgroup: %w", node, err)
		}
		return found[0], nil
	}
	return "", fmt.Errorf("node %s: %d svcnet proxy --data-plane %s processes run in its network namespace %s (give --cgroup %s=PATH)", node, len(found), ebpfplane.Name, name, node)
}

// proxyArgvs returns the command lines of the processes in node's network
// namespace (Network.NetNS; none when it is unknown).
func proxyArgvs(net *Network, node string) ([][]string, error) {
	name := net.NetNS[node]
	if name == "" {
		return nil, nil
	}
	pids, err := netns.PidsIn(filepath.Join(netns.RunDir, name))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	var out [][]string
	for _, pid := range pids {
		argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // exited
		}
		out = append(out, strings.Split(string(bytes.TrimRight(argv, "\x00")), "\x00"))
	}
	return out, nil
}

// externalOff reports whether a process's command line argv is svcnet
// proxy running the eBPF plane with its tc load balancer turned off
// (--ebpf-external=false).
func externalOff(argv []string) bool {
	if _, ok := proxyCgroup(argv); !ok {
		return false
	}
	on := true
	for _, a := range argv[2:] {
		if a == "--" {
			break
		}
		switch {
		case a == "--ebpf-external":
			on = true
		case strings.HasPrefix(a, "--ebpf-external="):
			if v, err := strconv.ParseBool(strings.TrimPrefix(a, "--ebpf-external=")); err == nil {
				on = v
			}
		}
	}
	return !on
}

// proxyCgroup reads a process's command line argv: ok when it is svcnet
// proxy running the eBPF plane, with the cgroup v2 path its --cgroup names
// ("/", the root, when none is given).
func proxyCgroup(argv []string) (path string, ok bool) {
	if len(argv) < 2 || filepath.Base(argv[0]) != "svcnet" || argv[1] != "proxy" {
		return "", false
	}
	plane, cg := "", "/"
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
	return cg, true
}

// proxyScheduler returns the --ebpf-scheduler of a process's command line
// argv when it is svcnet proxy running the eBPF plane ("" otherwise, or
// when the flag is not given: the default, random).
func proxyScheduler(argv []string) string {
	if _, ok := proxyCgroup(argv); !ok {
		return ""
	}
	s := ""
	for i := 2; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		switch {
		case a == "--ebpf-scheduler" && i+1 < len(argv):
			s = argv[i+1]
			i++
		case strings.HasPrefix(a, "--ebpf-scheduler="):
			s = strings.TrimPrefix(a, "--ebpf-scheduler=")
		}
	}
	return s
}
