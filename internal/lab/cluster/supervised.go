package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// Supervision names the process the lab starts for Argv: its supervisor (see
// Supervise), for Pod's containers, with Readiness probes and, for a node's
// Service proxy, the Node whose Ready condition follows them. Cgroup, when
// set, is the cgroup v2 directory the supervisor and so its child start in
// (a node's: NodeCgroup).
type Supervision struct {
	Pod       *corev1.Pod
	Readiness []string
	Node      string
	Argv      []string
	Cgroup    string
	stateFile string
}

// StartSupervised starts s's supervisor in ns as a daemon of the lab (its
// output and its child's to logPath, its state file beside, which starts
// empty: one a supervisor of the same process left is removed first) and
// returns the supervisor's pid.
func (c *Cluster) StartSupervised(ns *netns.NS, logPath string, s Supervision) (int, error) {
	s.stateFile = supervisorStateFile(logPath)
	if err := os.Remove(s.stateFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("start %s in %s: %w", s.Argv[0], ns.Name(), err)
	}
	return topology.StartDaemon(ns, logPath, topology.Daemon{Cgroup: s.Cgroup}, c.supervisorArgv(s)...)
}

// NodeCgroup returns node i's cgroup directory, making it when missing (a
// lab made before its nodes had cgroups gets them when a process of the node
// is started).
func (c *Cluster) NodeCgroup(i int) (string, error) {
	return topology.MakeNodeCgroup(c.Names, i)
}

// isSupervisor reports whether argv is a supervisor's, and for which Pod
// (NAMESPACE/NAME).
func isSupervisor(argv []string) (pod string, ok bool) {
	if len(argv) < 3 || argv[1] != "lab" || argv[2] != "supervise" {
		return "", false
	}
	for i, a := range argv {
		if a == "--" {
			break
		}
		if a == "--pod" && i+1 < len(argv) {
			return argv[i+1], true
		}
	}
	return "", true
}

// supervisorProc is a running supervisor: its pid and the Pod it reports
// (NAMESPACE/NAME).
type supervisorProc struct {
	pid int
	pod string
}

// supervisorsIn returns the supervisors running in the named namespace.
func supervisorsIn(nsName string) ([]supervisorProc, error) {
	pids, err := netns.PidsIn(netns.RunDir + "/" + nsName)
	if err != nil {
		return nil, err
	}
	var out []supervisorProc
	for _, p := range pids {
		if pod, ok := isSupervisor(topology.Cmdline(p)); ok && topology.Alive(p) {
			out = append(out, supervisorProc{pid: p, pod: pod})
		}
	}
	return out, nil
}

// childOf returns the live child of pid (the supervised process of a
// supervisor), or 0 when it has none. A child that has not exec'd (its
// command line is still pid's) is not counted: it is one about to become the
// child, or the one Go's runtime forks once to check that clone can return a
// pidfd, which exits at once.
func childOf(pid int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	self := topology.Cmdline(pid)
	var kids []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil && topology.Alive(c) && !slices.Equal(topology.Cmdline(c), self) {
				kids = append(kids, c)
			}
		}
	}
	if len(kids) == 0 {
		return 0
	}
	return slices.Min(kids)
}

// ChildWatch tells whether a supervised process has ended since the watch
// began: its supervisor counted more exits in its state file (see
// supervisorState) than when the watch began, or the supervisor itself is
// gone. A lab command waiting for a process it just started fails at once,
// with its log, when the process exits, as it did before processes were
// supervised.
type ChildWatch struct {
	sup   int
	state string // the supervisor's state file
	base  int    // exits counted when the watch began
}

// NewChildWatch watches the supervisor sup just started (no exit counted yet),
// whose output goes to logPath.
func NewChildWatch(sup int, logPath string) *ChildWatch {
	return &ChildWatch{sup: sup, state: supervisorStateFile(logPath)}
}

// fromNow makes w count only the exits after now, for a supervisor that has
// run for a while.
func (w *ChildWatch) fromNow() *ChildWatch {
	if st, err := readSupervisorState(w.state); err == nil {
		w.base = st.Exits
	}
	return w
}

func (w *ChildWatch) Ended() bool {
	if !topology.Alive(w.sup) {
		return true
	}
	st, err := readSupervisorState(w.state)
	return err == nil && st.Exits > w.base // written atomically: a read error is a race with nothing
}

// SupervisedPid returns the pid of the process the lab runs as Pod
// namespace/name's containers (a pod's server, or one of the lab's agents:
// see AgentPods), found through its supervisor, or 0 when its supervisor runs
// but no child does (it waits to restart it). It is an error when no
// supervisor of the Pod runs.
func (c *Cluster) SupervisedPid(namespace, name string) (int, error) {
	sup, err := c.SupervisorPid(namespace, name)
	if err != nil {
		return 0, err
	}
	return childOf(sup), nil
}

// SupervisorPid returns the pid of the supervisor of Pod namespace/name.
func (c *Cluster) SupervisorPid(namespace, name string) (int, error) {
	nsName := c.processNamespace(namespace, name)
	sups, err := supervisorsIn(nsName)
	if err != nil {
		return 0, fmt.Errorf("Pod %s/%s: %w", namespace, name, err)
	}
	for _, s := range sups {
		if s.pod == namespace+"/"+name {
			return s.pid, nil
		}
	}
	return 0, fmt.Errorf("Pod %s/%s: no supervisor runs in %s", namespace, name, nsName)
}
