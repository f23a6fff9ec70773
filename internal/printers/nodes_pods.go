package printers

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Nodes prints `kubectl get nodes`: NAME STATUS ROLES AGE VERSION, and with Wide
// INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME.
func Nodes(w io.Writer, nodes []*corev1.Node, opts Options) error {
	cols := []string{"NAME", "STATUS", "ROLES", "AGE", "VERSION"}
	if opts.Wide {
		cols = append(cols, "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME")
	}
	t := newTable(opts, false, cols...)
	for _, n := range nodes {
		cells := []string{n.Name, nodeStatus(n), nodeRoles(n), age(n, opts.Now), orNone(n.Status.NodeInfo.KubeletVersion)}
		if opts.Wide {
			i := n.Status.NodeInfo
			cells = append(cells, nodeAddr(n, corev1.NodeInternalIP), nodeAddr(n, corev1.NodeExternalIP),
				orUnknown(i.OSImage), orUnknown(i.KernelVersion), orUnknown(i.ContainerRuntimeVersion))
		}
		t.add(n, false, cells...)
	}
	return t.write(w, "nodes")
}

func nodeStatus(n *corev1.Node) string {
	st := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				st = "Ready"
			} else {
				st = "NotReady"
			}
		}
	}
	if n.Spec.Unschedulable {
		st += ",SchedulingDisabled"
	}
	return st
}

func nodeRoles(n *corev1.Node) string {
	var roles []string
	for k := range n.Labels {
		if r, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && r != "" {
			roles = append(roles, r)
		}
	}
	sort.Strings(roles)
	return orNone(strings.Join(roles, ","))
}

func nodeAddr(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// Pods prints `kubectl get pods`: NAME READY STATUS RESTARTS AGE, and with Wide
// IP NODE NOMINATED NODE READINESS GATES, as kubectl's printPod does for a
// Pod's (non-init) containers: READY counts the containers that are ready and
// running; a Pod without container statuses (manifests have none: no kubelet
// reported them) counts all containers ready when its Ready condition is True.
// STATUS is the Pod's phase or reason, overridden by a container's waiting
// reason (CrashLoopBackOff) or terminated reason. RESTARTS sums the
// containers' restart counts and says how long ago the last one ended
// ("2 (5s ago)").
func Pods(w io.Writer, pods []*corev1.Pod, opts Options) error {
	cols := []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}
	if opts.Wide {
		cols = append(cols, "IP", "NODE", "NOMINATED NODE", "READINESS GATES")
	}
	t := newTable(opts, true, cols...)
	for _, p := range pods {
		ready, status, restarts := podColumns(p, opts.Now)
		cells := []string{p.Name, ready, status, restarts, age(p, opts.Now)}
		if opts.Wide {
			cells = append(cells, orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Status.NominatedNodeName), "<none>")
		}
		t.add(p, true, cells...)
	}
	return t.write(w, "pods")
}

// podColumns returns the READY, STATUS and RESTARTS cells of p.
func podColumns(p *corev1.Pod, now time.Time) (ready, status, restarts string) {
	total := len(p.Spec.Containers)
	nReady, nRestarts := 0, int32(0)
	var lastRestart time.Time
	reason := string(p.Status.Phase)
	if reason == "" {
		reason = string(corev1.PodPending)
	}
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	hasRunning, errorReason := false, ""
	for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := p.Status.ContainerStatuses[i]
		nRestarts += c.RestartCount
		if t := c.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(lastRestart) {
			lastRestart = t.FinishedAt.Time
		}
		switch {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			reason = c.State.Waiting.Reason
		case c.State.Terminated != nil:
			reason = terminatedReason(c.State.Terminated)
			if c.State.Terminated.ExitCode != 0 {
				errorReason = reason
			}
		case c.Ready && c.State.Running != nil:
			hasRunning = true
			nReady++
		}
	}
	if reason == "Completed" {
		switch {
		case hasRunning && podReadyCondition(p):
			reason = string(corev1.PodRunning)
		case errorReason != "":
			reason = errorReason
		case hasRunning:
			reason = "NotReady"
		}
	}
	if len(p.Status.ContainerStatuses) == 0 && podReadyCondition(p) {
		nReady = total
	}
	if p.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	restarts = fmt.Sprint(nRestarts)
	if nRestarts != 0 && !lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", nRestarts, duration.HumanDuration(now.Sub(lastRestart)))
	}
	return fmt.Sprintf("%d/%d", nReady, total), reason, restarts
}

func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	}
	return fmt.Sprintf("ExitCode:%d", t.ExitCode)
}

func podReadyCondition(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
