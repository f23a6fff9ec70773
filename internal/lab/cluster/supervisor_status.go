package cluster

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lab/supervise"
)

// childStatus is what a supervisor knows of its child: what a container
// runtime and the kubelet's prober tell the kubelet of a container.
type childStatus struct {
	// Restarts counts the starts after the first.
	Restarts int32
	// Running is set while a child runs (since StartedAt).
	Running   bool
	StartedAt time.Time
	// Ready: the child runs and its readiness probes pass.
	Ready bool
	// Exit is the child's last end: its current state while it neither runs
	// nor waits, else its last termination state.
	Exit *supervise.Exit
	// Prev is the end before Exit, the last termination state while Exit is
	// the current state.
	Prev *supervise.Exit
	// Backoff, when set, is the back-off the next start waits for
	// (CrashLoopBackOff).
	Backoff time.Duration
}

// observe updates st with an event of the supervisor's child. probed says
// whether readiness comes from probes (then a new child is not ready until
// they pass) or from running alone.
func (st *childStatus) observe(e supervise.Event, probed bool) {
	switch e.Kind {
	case supervise.Started:
		if !st.StartedAt.IsZero() {
			st.Restarts++
		}
		st.Running, st.StartedAt, st.Ready, st.Backoff = true, e.At, !probed, 0
		if st.Exit != nil {
			st.Prev = nil
		}
	case supervise.Exited:
		st.Running, st.Ready, st.Backoff = false, false, 0
		st.Prev, st.Exit = st.Exit, e.Exit
	case supervise.BackingOff:
		st.Backoff = e.Backoff
	}
}

// containerStatus is st as the status of container c, as the kubelet reports
// it: running (with the last termination), waiting in CrashLoopBackOff, or
// terminated (with the one before).
func (st *childStatus) containerStatus(c corev1.Container) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: st.Restarts,
		Ready: st.Running && st.Ready, Started: ptrTo(st.Running)}
	last := st.Exit
	switch {
	case st.Running:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(st.StartedAt)}
	case st.Backoff > 0:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container=%s", st.Backoff, c.Name)}
	case st.Exit != nil:
		cs.State.Terminated = terminated(st.Exit)
		last = st.Prev
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	if last != nil {
		cs.LastTerminationState.Terminated = terminated(last)
	}
	return cs
}

func terminated(e *supervise.Exit) *corev1.ContainerStateTerminated {
	t := &corev1.ContainerStateTerminated{ExitCode: e.Code, Signal: int32(e.Signal), Reason: e.Reason(),
		StartedAt: metav1.NewTime(e.StartedAt), FinishedAt: metav1.NewTime(e.FinishedAt)}
	if e.StartErr != nil {
		t.Message = e.StartErr.Error()
	}
	return t
}

// applyChildStatus writes st into pod's status as the kubelet's status
// manager does: every container's status (a lab pod runs one process for all
// its containers, so each reports that process), and the ContainersReady and
// Ready conditions, whose transition time moves only when they flip. It
// reports whether the status changed.
func applyChildStatus(pod *corev1.Pod, st childStatus, now time.Time) bool {
	old := pod.Status.DeepCopy()
	statuses := make([]corev1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		cs := st.containerStatus(c)
		for _, o := range pod.Status.ContainerStatuses {
			if o.Name == c.Name {
				cs.ContainerID, cs.ImageID = o.ContainerID, o.ImageID
			}
		}
		statuses = append(statuses, cs)
	}
	pod.Status.ContainerStatuses = statuses
	ready := corev1.ConditionFalse
	if st.Running && st.Ready {
		ready = corev1.ConditionTrue
	}
	for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		setPodCondition(&pod.Status, t, ready, now)
	}
	return !equality.Semantic.DeepEqual(old, &pod.Status)
}

func setPodCondition(s *corev1.PodStatus, t corev1.PodConditionType, status corev1.ConditionStatus, now time.Time) {
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.Status, c.LastTransitionTime = status, metav1.NewTime(now)
			c.Reason = ""
			if status != corev1.ConditionTrue {
				c.Reason = "ContainersNotReady"
			}
		}
		return
	}
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.NewTime(now)})
}

// Reasons of the Node Ready condition, the kubelet's.
const (
	nodeReadyReason    = "KubeletReady"
	nodeNotReadyReason = "KubeletNotReady"
)

// setNodeReady sets node's Ready condition as the kubelet does when it
// posts its status, and reports whether the condition's status changed (a
// message alone is not worth a write).
func setNodeReady(node *corev1.Node, ready bool, message string, now time.Time) bool {
	status, reason := corev1.ConditionFalse, nodeNotReadyReason
	if ready {
		status, reason = corev1.ConditionTrue, nodeReadyReason
	}
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == status {
			return false
		}
		c.Status, c.Reason, c.Message = status, reason, message
		c.LastTransitionTime, c.LastHeartbeatTime = metav1.NewTime(now), metav1.NewTime(now)
		return true
	}
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: status,
		Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now), LastHeartbeatTime: metav1.NewTime(now)})
	return true
}
