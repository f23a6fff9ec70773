package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/lab/supervise"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/source/kube"
)

// Supervision: every process the lab runs (each node's svcnet proxy, and
// kube-proxy where the lab runs it; every pod's server, the cluster DNS among
// them; the LoadBalancer controller) is the child of a supervisor of its own,
// `svcnet lab supervise`, started in the same namespace as a daemon of the
// lab. The supervisor plays the kubelet for that one container:
//
//   - it restarts the child whenever it exits, with the kubelet's
//     CrashLoopBackOff (package supervise: at once, then 1 s doubling to
//     10 s, forgotten after 20 s of good running);
//   - it probes the child's readiness (tcp:// or http:// probes, every
//     probePeriod with a timeout of probeTimeout, not ready after
//     probeFailures failures in a row; every probeFastPeriod after a start
//     until the first pass) and, for a node's Service proxy, posts the
//     Node's Ready condition from its /healthz the same way (NotReady after
//     probeFailures failed probes, Ready again at the first pass);
//   - it posts the status of the child's Pod as the kubelet does: restart
//     count, the last termination (exit code, signal, reason, times),
//     running or waiting in CrashLoopBackOff, ready, and the Pod's Ready
//     condition. Processes that are not a pod's server run as Pods of
//     kube-system (agentpods.go), so `lab get pods -n kube-system` shows
//     them and their restarts.
//
// Statuses go to the lab's control plane (the file control plane's objects,
// published again; or the API server), always under the lab's lock (see
// statusWriter), so a lab command and a supervisor never write over each
// other.
//
// `lab down` finds supervisors by their namespaces like every lab process;
// SIGTERM stops a supervisor and its child, and stopNamespaceProcesses looks
// again until the namespace is empty, so a child started in the instant of
// the stop does not survive it.
//
// A supervisor killed with SIGKILL is a killed kubelet: its child keeps
// running, unsupervised (it is not restarted if it exits, and its Pod's and
// Node's statuses stay as last posted: the lab runs no node lifecycle
// controller to notice); `lab down` removes both as before.
const (
	probePeriod     = time.Second
	probeFastPeriod = 100 * time.Millisecond
	probeTimeout    = time.Second
	probeFailures   = 3
)

// SuperviseOptions configure Supervise.
type SuperviseOptions struct {
	// Lab is the lab's name.
	Lab string
	// Pod is NAMESPACE/NAME of the Pod whose containers the child is.
	Pod string
	// Kubeconfig, on the kube control plane, is where statuses are posted;
	// empty: the lab's file control plane.
	Kubeconfig string
	// Readiness are the child's readiness probes (see supervise.ParseProbe);
	// none: ready while it runs.
	Readiness []string
	// Node, with Readiness, is the Node whose Ready condition follows them.
	Node string
	// StateFile, when set, is where the supervisor keeps its child's state
	// for lab commands on this machine (see supervisorState).
	StateFile string
	// Argv is the child's command line.
	Argv []string
}

// supervisorState is what a supervisor tells lab commands of its child, in
// its state file, as a container runtime reports a container: the child's
// pid (0 when none runs) and how many times a child started and ended. A lab
// command waiting for a process it started fails as soon as Exits grows.
type supervisorState struct {
	PID    int `json:"pid"`
	Starts int `json:"starts"`
	Exits  int `json:"exits"`
}

// supervisorStateFile is the state file of the supervisor whose output goes
// to logPath.
func supervisorStateFile(logPath string) string { return logPath + ".state" }

// readSupervisorState reads a state file; a missing one is the zero state.
func readSupervisorState(path string) (supervisorState, error) {
	var st supervisorState
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// Supervise runs o.Argv as the supervised child of o.Pod until ctx ends (see
// above), writing the child's output to this process's stdout and stderr.
func Supervise(ctx context.Context, o SuperviseOptions, log klog.Logger) error {
	if err := topology.ValidateName(o.Lab); err != nil {
		return err
	}
	namespace, name, ok := strings.Cut(o.Pod, "/")
	if !ok || namespace == "" || name == "" {
		return fmt.Errorf("supervise: --pod %q: want NAMESPACE/NAME", o.Pod)
	}
	if len(o.Argv) == 0 {
		return errors.New("supervise: no command")
	}
	if o.Node != "" && len(o.Readiness) == 0 {
		return fmt.Errorf("supervise: --node %s needs a readiness probe", o.Node)
	}
	var probes []supervise.Probe
	for _, r := range o.Readiness {
		p, err := supervise.ParseProbe(r)
		if err != nil {
			return fmt.Errorf("supervise: --readiness: %w", err)
		}
		probes = append(probes, p)
	}
	n := topology.Names{Lab: o.Lab}
	var sink statusSink
	if o.Kubeconfig == "" {
		info, err := ReadInfo(n)
		if err != nil {
			return fmt.Errorf("supervise: %w", err)
		}
		sink = NewFile(n, info.Stack())
	} else {
		client, err := kube.NewClient(o.Kubeconfig)
		if err != nil {
			return fmt.Errorf("supervise: %w", err)
		}
		sink = kubeStatus{client: client}
	}
	s := &supervisor{probes: probes, node: o.Node, started: make(chan struct{}, 1), stateFile: o.StateFile,
		w: newStatusWriter(n, sink, namespace, name, o.Node, log), log: log}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.w.run(ctx) })
	if len(probes) > 0 {
		wg.Go(func() { s.probe(ctx) })
	}
	err := supervise.Run(ctx, supervise.Config{Argv: o.Argv, Stdout: os.Stdout, Stderr: os.Stderr, Events: s.event, Log: log})
	cancel()
	wg.Wait()
	return err
}

// supervisor is one running Supervise: the child's status, shared by the
// restart loop's events and the prober, and the writer that posts it.
type supervisor struct {
	probes    []supervise.Probe
	node      string
	started   chan struct{} // a new child runs (not the first)
	stateFile string
	w         *statusWriter
	log       klog.Logger

	mu    sync.Mutex
	st    childStatus
	local supervisorState
}

// event records an event of the child and queues the Pod's new status. The
// first start is not posted: the lab command that started the supervisor
// posts the Pod running and ready once it has checked that it serves.
func (s *supervisor) event(e supervise.Event) {
	s.writeState(e)
	s.mu.Lock()
	first := e.Kind == supervise.Started && s.st.StartedAt.IsZero()
	s.st.observe(e, len(s.probes) > 0)
	if first {
		s.st.Ready = true
	} else {
		// Queued under s.mu, so statuses are queued in the order they were
		// recorded.
		s.w.setChild(s.st)
	}
	s.mu.Unlock()
	if e.Kind == supervise.Started && !first {
		select {
		case s.started <- struct{}{}:
		default:
		}
	}
}

// writeState records a start or an end of the child in the state file,
// before anything else learns of it.
func (s *supervisor) writeState(e supervise.Event) {
	switch e.Kind {
	case supervise.Started:
		s.local.PID = e.PID
		s.local.Starts++
	case supervise.Exited:
		s.local.PID = 0
		s.local.Exits++
	default:
		return
	}
	if s.stateFile == "" {
		return
	}
	b, err := json.Marshal(s.local)
	if err == nil {
		err = writeFileAtomic(s.stateFile, b)
	}
	if err != nil {
		s.log.Error(err, "writing the state file", "path", s.stateFile)
	}
}

// setReady records the child's readiness, and queues the Pod's status when it
// changed.
func (s *supervisor) setReady(ready bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Running && s.st.Ready != ready {
		s.st.Ready = ready
		s.w.setChild(s.st)
	}
}

// probe runs the readiness probes until ctx ends: every probePeriod, and
// every probeFastPeriod after a restart until they pass. A failure counts
// towards probeFailures at most once per probePeriod, so a child that is
// restarted at once is not declared unready, nor its Node NotReady, for the
// moment it takes to start.
func (s *supervisor) probe(ctx context.Context) {
	container := supervise.Threshold{Success: 1, Failure: probeFailures}
	node := supervise.Threshold{Success: 1, Failure: probeFailures}
	fast := true
	var counted time.Time
	for {
		began := time.Now()
		err := s.check(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		if err == nil || now.Sub(counted) >= probePeriod-probeFastPeriod/2 {
			counted = now
			if ready, changed := container.Observe(err == nil); changed {
				s.setReady(ready)
			}
			if ready, changed := node.Observe(err == nil); changed && s.node != "" {
				msg := "kubelet is posting ready status"
				if !ready {
					msg = "node proxy not healthy: " + err.Error()
				}
				s.w.setNodeReady(ready, msg)
			}
		}
		if err == nil {
			fast = false
		}
		// The next probe is a period after this one began, as the
		// kubelet's probe ticker fires, however long this one took.
		wait := probePeriod
		if fast {
			wait = probeFastPeriod
		}
		wait -= now.Sub(began)
		select {
		case <-ctx.Done():
			return
		case <-s.started:
			container.Reset(false)
			fast = true
		case <-time.After(wait):
		}
	}
}

// check runs every probe once.
func (s *supervisor) check(ctx context.Context) error {
	for _, p := range s.probes {
		if err := p.Check(ctx, probeTimeout); err != nil {
			return err
		}
	}
	return nil
}
