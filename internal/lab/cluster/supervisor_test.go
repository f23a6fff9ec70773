package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/source/file"
)

// Supervise in this process over a lab's file control plane (state under
// /run/svcnet/lab, hence root; no namespace): a child killed with SIGKILL is
// restarted at once even while a lab command holds the lab's lock, and its
// restart is posted in the Pod's status (and published) once the lock is
// free; a failing /healthz takes the Node NotReady and a passing one Ready
// again; the end of the context stops the child.
func TestSupervisorOverFileControlPlane(t *testing.T) {
	netnstest.RequireRoot(t)
	n := topology.Names{Lab: fmt.Sprintf("supt%d", os.Getpid()%100000)}
	t.Cleanup(func() {
		_ = os.RemoveAll(n.Dir())
		_ = os.Remove(lockPath(n))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := os.MkdirAll(n.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteInfo(n, &Info{Name: n.Lab, Nodes: 1, ControlPlane: ControlPlaneFile}); err != nil {
		t.Fatal(err)
	}
	fc := NewFile(n, nil)
	if err := fc.RegisterNodes(ctx, []*corev1.Node{Node(nil, 1)}); err != nil {
		t.Fatal(err)
	}
	argv := []string{"sleep", "60"}
	pod := agentPod("test-agent", "test agent", "agent", svcnetImage, topology.NodeName(1), argv)
	if err := fc.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = PodStatus([]netip.Addr{topology.NodeAddr(1)}, topology.NodeAddr(1), pod)
	if err := fc.SetPodStatus(ctx, pod); err != nil {
		t.Fatal(err)
	}

	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	logPath := filepath.Join(t.TempDir(), "agent.log")
	watch := NewChildWatch(os.Getpid(), logPath) // this process is the supervisor
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Supervise(sctx, SuperviseOptions{Lab: n.Lab, Pod: "kube-system/test-agent", Readiness: []string{srv.URL + "/healthz"},
			Node: topology.NodeName(1), StateFile: supervisorStateFile(logPath), Argv: argv}, klog.Background())
	}()
	stopped := false
	stopSupervisor := func() {
		if stopped {
			return
		}
		stopped = true
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Supervise: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Supervise did not return within 10s of its context's end")
		}
	}
	defer stopSupervisor()

	child := waitValue(t, "the child", 5*time.Second, func() int { return childOf(os.Getpid()) })
	waitState(t, logPath, supervisorState{PID: child, Starts: 1})
	if watch.Ended() {
		t.Fatal("the watch of a running child says it ended")
	}

	// 1. Killed while a lab command holds the lock.
	unlock, err := Lock(n)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		unlock()
		t.Fatal(err)
	}
	again := waitValue(t, "a new child", 5*time.Second, func() int {
		if c := childOf(os.Getpid()); c != child {
			return c
		}
		return 0
	})
	took := time.Since(killed)
	waitState(t, logPath, supervisorState{PID: again, Starts: 2, Exits: 1})
	if !watch.Ended() {
		t.Error("the watch of a killed child does not say it ended")
	}
	if NewChildWatch(os.Getpid(), logPath).fromNow().Ended() {
		t.Error("a watch begun after the kill says the child ended")
	}
	time.Sleep(300 * time.Millisecond)
	held := restartCount(t, fc)
	unlock()
	t.Logf("kill -9 of %d: %d started %v later while the lab was locked", child, again, took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("the restart took %v, want under 1s", took)
	}
	if held != 0 {
		t.Errorf("restart count %d posted while a lab command held the lock", held)
	}
	waitValue(t, "restart count 1, ready, posted and published", 10*time.Second, func() int {
		p, err := fc.Pod(ctx, "kube-system", "test-agent")
		if err != nil || p == nil || len(p.Status.ContainerStatuses) != 1 {
			return 0
		}
		cs := p.Status.ContainerStatuses[0]
		last := cs.LastTerminationState.Terminated
		if cs.RestartCount != 1 || !cs.Ready || last == nil || last.Signal != int32(syscall.SIGKILL) || last.ExitCode != 137 {
			return 0
		}
		if published(t, fc) != 1 {
			return 0
		}
		return 1
	}, func() string {
		p, err := fc.Pod(ctx, "kube-system", "test-agent")
		return fmt.Sprintf("pod %v: %+v, published restart count %d", err, p.Status, published(t, fc))
	})

	// 2. /healthz fails, then passes.
	healthy.Store(false)
	failed := time.Now()
	waitValue(t, "node1 NotReady", 10*time.Second, func() int { return boolInt(readyOf(t, fc) == corev1.ConditionFalse) })
	t.Logf("node1 NotReady %v after its /healthz began to fail", time.Since(failed).Round(time.Millisecond))
	healthy.Store(true)
	passed := time.Now()
	waitValue(t, "node1 Ready", 10*time.Second, func() int { return boolInt(readyOf(t, fc) == corev1.ConditionTrue) })
	t.Logf("node1 Ready %v after its /healthz passed again", time.Since(passed).Round(time.Millisecond))

	// 3. Stopped.
	last := childOf(os.Getpid())
	stopSupervisor()
	if last != 0 && topology.Alive(last) {
		t.Errorf("child %d still runs after the supervisor stopped", last)
	}
}

// waitValue polls fn every 20 ms until it returns non-zero, failing t after
// limit (with what the first of explain says).
func waitValue(t *testing.T, what string, limit time.Duration, fn func() int, explain ...func() string) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if v := fn(); v != 0 {
			return v
		}
		time.Sleep(20 * time.Millisecond)
	}
	more := ""
	if len(explain) > 0 {
		more = ": " + explain[0]()
	}
	t.Fatalf("%s: not within %v%s", what, limit, more)
	return 0
}

// waitState waits up to 5 s for the supervisor's state file to say want.
func waitState(t *testing.T, logPath string, want supervisorState) {
	t.Helper()
	var st supervisorState
	waitValue(t, fmt.Sprintf("state %+v", want), 5*time.Second, func() int {
		st, _ = readSupervisorState(supervisorStateFile(logPath))
		return boolInt(st == want)
	}, func() string { return fmt.Sprintf("state %+v", st) })
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func restartCount(t *testing.T, fc *File) int32 {
	t.Helper()
	p, err := fc.Pod(context.Background(), "kube-system", "test-agent")
	if err != nil || p == nil {
		t.Fatalf("pod: %v %v", p, err)
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}

// published returns the restart count of the test Pod in cluster.yaml.
func published(t *testing.T, fc *File) int32 {
	t.Helper()
	objs, _, err := file.ReadManifests(fc.PublishPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if p, ok := o.Obj.(*corev1.Pod); ok && p.Name == "test-agent" && len(p.Status.ContainerStatuses) > 0 {
			return p.Status.ContainerStatuses[0].RestartCount
		}
	}
	return -1
}

func readyOf(t *testing.T, fc *File) corev1.ConditionStatus {
	t.Helper()
	r, err := fc.Result(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.Nodes {
		for _, c := range n.Status.Conditions {
			if n.Name == topology.NodeName(1) && c.Type == corev1.NodeReady {
				return c.Status
			}
		}
	}
	return corev1.ConditionUnknown
}
