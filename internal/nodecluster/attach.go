package nodecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/kubecluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// Attach returns the cluster that an Up (typically with Options.Detach, by
// another process) left running in dir: it reads what the cluster is from
// dir, requires every node's holder to be running, and waits (bounded by
// timeout) until the apiserver is ready. Its Command, Kubectl, NodeCommand,
// ImportImage, Memory and Down work as Up's; Logs shows the control plane's
// logs and every node's.
func Attach(ctx context.Context, dir string, timeout time.Duration) (*Cluster, error) {
	dir = filepath.Clean(dir)
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("nodecluster: attach: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("nodecluster: attach: %s: %w", filepath.Join(dir, stateFile), err)
	}
	if err := topology.ValidateName(st.Name); err != nil {
		return nil, fmt.Errorf("nodecluster: attach: %s: %w", filepath.Join(dir, stateFile), err)
	}
	c := &Cluster{
		Name: st.Name, Dir: dir, Nodes: st.Nodes,
		ControlPlaneNetNS: topology.Names{Lab: st.Name}.Control(),
		ControlPlaneAddr:  topology.ControlAddr,
		APIServer:         fmt.Sprintf("https://%s:%d", topology.ControlAddr, kubecluster.DefaultPorts.APIServer),
		o:                 Options{Name: st.Name, Dir: dir, K8sBin: st.K8sBin, ContainerdBin: st.ContainerdBin, ReadyTimeout: timeout},
		l:                 layout{name: st.Name, dir: dir},
	}
	if err := c.attach(ctx, timeout); err != nil {
		c.closeNS()
		return nil, fmt.Errorf("nodecluster %s: attach: %w", st.Name, err)
	}
	return c, nil
}

func (c *Cluster) attach(ctx context.Context, timeout time.Duration) error {
	var err error
	if c.hier, c.v2, err = cgroupMounts(); err != nil {
		return err
	}
	if c.cpNS, err = netns.Open(c.ControlPlaneNetNS); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		nd := &node{Node: n, dir: c.l.nodeDir(n.Name), cgroup: filepath.Join(c.v2, c.l.cgroupDaemons(n.Name))}
		c.nodes = append(c.nodes, nd)
		if nd.ns, err = netns.Open(n.NetNS); err != nil {
			return err
		}
		pid, err := readPid(nd.configPath("holder.pid"))
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if !alive(pid) || !inCgroup(pid, c.l.cgroupDaemons(n.Name)) {
			return fmt.Errorf("node %s: its holder (pid %d) is not running", n.Name, pid)
		}
		nd.holder = adopted(n.Name+" holder", nd.logPath("holder"), pid)
		for _, name := range []string{"containerd", "kubelet"} {
			d := &daemon{name: n.Name + " " + name, logPath: nd.logPath(name)}
			if name == "containerd" {
				nd.containerd = d
			} else {
				nd.kubelet = d
			}
		}
	}
	cp, err := kubecluster.Attach(ctx, kubecluster.Options{
		Dir:          c.l.cpDir(),
		Dial:         kubecluster.DialFunc(netns.Dialer(c.cpNS)),
		ReadyTimeout: timeout,
	})
	if err != nil {
		return err
	}
	return c.useControlPlane(cp)
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: not a pid: %q", path, b)
	}
	return pid, nil
}

// inCgroup reports whether pid is in the cgroup2 cgroup rel (relative to the
// hierarchy's root): a pid reused by another process is not.
func inCgroup(pid int, rel string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p == "/"+rel
		}
	}
	return false
}
