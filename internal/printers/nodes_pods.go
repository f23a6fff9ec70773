package printers

import (
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
// IP NODE NOMINATED NODE READINESS GATES. READY counts ready container statuses; a
// Pod without container statuses (manifests have none: no kubelet reported them)
// counts all containers ready when its Ready condition is True.
func Pods(w io.Writer, pods []*corev1.Pod, opts Options) error {
	cols := []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}
	if opts.Wide {
		cols = append(cols, "IP", "NODE", "NOMINATED NODE", "READINESS GATES")
	}
	t := newTable(opts, true, cols...)
	for _, p := range pods {
		ready, restarts := podReady(p)
		cells := []string{p.Name, ready, podStatus(p), fmt.Sprint(restarts), age(p, opts.Now)}
		if opts.Wide {
			cells = append(cells, orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Status.NominatedNodeName), "<none>")
		}
		t.add(p, true, cells...)
	}
	return t.write(w, "pods")
}

func podReady(p *corev1.Pod) (string, int32) {
	total := len(p.Spec.Containers)
	ready := 0
	var restarts int32
	if len(p.Status.ContainerStatuses) > 0 {
		for _, c := range p.Status.ContainerStatuses {
			if c.Ready {
				ready++
			}
			restarts += c.RestartCount
		}
	} else {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = total
			}
		}
	}
	return fmt.Sprintf("%d/%d", ready, total), restarts
}

func podStatus(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	if p.Status.Reason != "" {
		return p.Status.Reason
	}
	if p.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(p.Status.Phase)
}
