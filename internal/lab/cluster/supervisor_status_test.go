package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/lab/supervise"
)

// A child's life as the supervisor sees it, and the container statuses and
// Pod conditions the kubelet would post at each step.
func TestChildStatusAsTheKubeletPostsIt(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "svcnet-echo"}, {Name: "side", Image: "svcnet-echo"}}}}
	pod.Status = PodStatus([]netip.Addr{netip.MustParseAddr("192.168.1.5")}, netip.MustParseAddr("172.26.236.177"), pod)

	var st childStatus
	st.observe(supervise.Event{Kind: supervise.Started, At: at(0), PID: 10}, true)
	st.Ready = true // the lab posted it ready
	killed := &supervise.Exit{Code: 137, Signal: syscall.SIGKILL, StartedAt: at(0), FinishedAt: at(60)}
	crashed := &supervise.Exit{Code: 1, StartedAt: at(60), FinishedAt: at(61)}
	type want struct {
		state    string // running, waiting:REASON, terminated:REASON
		last     string // "" or the last termination's reason and exit code
		restarts int32
		ready    bool
	}
	for _, step := range []struct {
		name  string
		event *supervise.Event
		ready *bool
		want  want
	}{
		{"runs", nil, nil, want{"running", "", 0, true}},
		{"killed", &supervise.Event{Kind: supervise.Exited, At: at(60), Exit: killed}, nil, want{"terminated:Error", "", 0, false}},
		{"restarted", &supervise.Event{Kind: supervise.Started, At: at(60), PID: 11}, nil, want{"running", "Error/137", 1, false}},
		{"probe passes", nil, ptrTo(true), want{"running", "Error/137", 1, true}},
		{"crashed", &supervise.Event{Kind: supervise.Exited, At: at(61), Exit: crashed}, nil, want{"terminated:Error", "Error/137", 1, false}},
		{"backs off", &supervise.Event{Kind: supervise.BackingOff, At: at(61), Backoff: time.Second}, nil, want{"waiting:CrashLoopBackOff", "Error/1", 1, false}},
		{"restarted again", &supervise.Event{Kind: supervise.Started, At: at(62), PID: 12}, nil, want{"running", "Error/1", 2, false}},
	} {
		if step.event != nil {
			st.observe(*step.event, true)
		}
		if step.ready != nil {
			st.Ready = *step.ready
		}
		applyChildStatus(pod, st, at(100))
		if len(pod.Status.ContainerStatuses) != 2 {
			t.Fatalf("%s: %d container statuses, want one per container", step.name, len(pod.Status.ContainerStatuses))
		}
		for _, cs := range pod.Status.ContainerStatuses {
			got := want{restarts: cs.RestartCount, ready: cs.Ready}
			switch s := cs.State; {
			case s.Running != nil:
				got.state = "running"
			case s.Waiting != nil:
				got.state = "waiting:" + s.Waiting.Reason
			case s.Terminated != nil:
				got.state = "terminated:" + s.Terminated.Reason
			}
			if l := cs.LastTerminationState.Terminated; l != nil {
				got.last = fmt.Sprintf("%s/%d", l.Reason, l.ExitCode)
			}
			if got != step.want {
				t.Errorf("%s: container %s: %+v, want %+v", step.name, cs.Name, got, step.want)
			}
		}
		wantCond := corev1.ConditionFalse
		if step.want.ready {
			wantCond = corev1.ConditionTrue
		}
		for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
			if c := podCondition(pod, ct); c == nil || c.Status != wantCond {
				t.Errorf("%s: condition %s %+v, want %s", step.name, ct, c, wantCond)
			}
		}
	}
	last := pod.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if !last.StartedAt.Time.Equal(at(60)) || !last.FinishedAt.Time.Equal(at(61)) {
		t.Errorf("last termination %v..%v, want the crash's 60s..61s", last.StartedAt, last.FinishedAt)
	}
	if pod.Status.PodIP != "192.168.1.5" || pod.Status.Phase != corev1.PodRunning {
		t.Errorf("the rest of the status changed: %s %s", pod.Status.PodIP, pod.Status.Phase)
	}
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Posting the same status again changes nothing; a condition's transition
// time moves only when it flips.
func TestApplyChildStatusIsIdempotent(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	st := childStatus{Running: true, StartedAt: time.Unix(100, 0), Ready: true}
	if !applyChildStatus(pod, st, time.Unix(200, 0)) {
		t.Fatal("first post: no change reported")
	}
	if applyChildStatus(pod, st, time.Unix(300, 0)) {
		t.Fatal("the same status again: a change reported")
	}
	st.Ready = false
	applyChildStatus(pod, st, time.Unix(400, 0))
	if c := podCondition(pod, corev1.PodReady); c.Status != corev1.ConditionFalse || c.LastTransitionTime.Unix() != 400 || c.Reason != "ContainersNotReady" {
		t.Fatalf("after unready: %+v", c)
	}
}

func TestSetNodeReady(t *testing.T) {
	n := Node(nil, 1)
	if setNodeReady(n, true, "ok", time.Unix(10, 0)) {
		t.Fatal("Ready again: a change reported")
	}
	if !setNodeReady(n, false, "node proxy not healthy: refused", time.Unix(20, 0)) {
		t.Fatal("NotReady: no change reported")
	}
	c := n.Status.Conditions[0]
	if c.Status != corev1.ConditionFalse || c.Reason != nodeNotReadyReason || c.Message != "node proxy not healthy: refused" || c.LastTransitionTime.Unix() != 20 {
		t.Fatalf("NotReady condition %+v", c)
	}
	if setNodeReady(n, false, "another message", time.Unix(30, 0)) {
		t.Fatal("a new message alone: a change reported")
	}
	if !setNodeReady(n, true, "kubelet is posting ready status", time.Unix(40, 0)) || n.Status.Conditions[0].Reason != nodeReadyReason {
		t.Fatalf("Ready: %+v", n.Status.Conditions[0])
	}
	bare := &corev1.Node{}
	if !setNodeReady(bare, true, "", time.Unix(1, 0)) || len(bare.Status.Conditions) != 1 {
		t.Fatalf("a Node without conditions: %+v", bare.Status.Conditions)
	}
}

func TestStartErrorIsPosted(t *testing.T) {
	var st childStatus
	st.observe(supervise.Event{Kind: supervise.Started, At: time.Unix(1, 0)}, false)
	st.observe(supervise.Event{Kind: supervise.Exited, Exit: &supervise.Exit{Code: 128, StartErr: errors.New("exec: no such file"), FinishedAt: time.Unix(2, 0)}}, false)
	cs := st.containerStatus(corev1.Container{Name: "c"})
	if cs.State.Terminated == nil || cs.State.Terminated.Reason != "StartError" || cs.State.Terminated.Message != "exec: no such file" {
		t.Fatalf("state %+v", cs.State)
	}
}
