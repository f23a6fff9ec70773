package describe

import (
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Node returns kubectl describe's text of node, given its non-terminated
// pods (all namespaces, in the API server's order), its lease
// (kube-node-lease/NAME) or the error getting it (leaseErr non-nil =>
// lease is nil; both nil is a lease that does not exist, shown as
// kubectl shows its NotFound error), and its events, ages counted at
// now. Node-local ResourceSlices are not shown (kubectl shows nothing
// without them), and the pods are always shown (kubectl's "not
// authorized" is for a caller that may not list them).
func Node(node *corev1.Node, pods []corev1.Pod, lease *coordinationv1.Lease, leaseErr error, events []corev1.Event, now time.Time) string {
	return tabbed(func(w writer) {
		s, st := &node.Spec, &node.Status
		w.write(level0, "Name:\t%s\n", node.Name)
		w.write(level0, "Roles:\t%s\n", orNone(strings.Join(nodeRoles(node.Labels), ",")))
		labelsBlock(w, "Labels", node.Labels)
		annotationsBlock(w, "Annotations", node.Annotations)
		w.write(level0, "CreationTimestamp:\t%s\n", rfc1123z(node.CreationTimestamp))
		taints(w, s.Taints)
		w.write(level0, "Unschedulable:\t%v\n", s.Unschedulable)
		if lease == nil && leaseErr == nil {
			leaseErr = apierrors.NewNotFound(coordinationv1.Resource("leases"), node.Name)
		}
		if leaseErr != nil {
			w.write(level0, "Lease:\tFailed to get lease: %s\n", leaseErr)
		} else {
			nodeLease(w, lease)
		}
		if len(st.Conditions) > 0 {
			w.write(level0, "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n")
			w.write(level1, "----\t------\t-----------------\t------------------\t------\t-------\n")
			for _, c := range st.Conditions {
				w.write(level1, "%v \t%v \t%s \t%s \t%v \t%v\n", c.Type, c.Status,
					rfc1123z(c.LastHeartbeatTime), rfc1123z(c.LastTransitionTime), c.Reason, c.Message)
			}
		}
		w.write(level0, "Addresses:\n")
		for _, a := range st.Addresses {
			w.write(level1, "%s:\t%s\n", a.Type, a.Address)
		}
		for _, l := range []struct {
			title string
			list  corev1.ResourceList
		}{{"Capacity", st.Capacity}, {"Allocatable", st.Allocatable}} {
			if len(l.list) == 0 {
				continue
			}
			w.write(level0, "%s:\n", l.title)
			for _, name := range sortedResourceNames(l.list) {
				q := l.list[name]
				w.write(level0, "  %s:\t%s\n", name, q.String())
			}
		}
		info := &st.NodeInfo
		w.write(level0, "System Info:\n")
		w.write(level0, "  Machine ID:\t%s\n", info.MachineID)
		w.write(level0, "  System UUID:\t%s\n", info.SystemUUID)
		w.write(level0, "  Boot ID:\t%s\n", info.BootID)
		w.write(level0, "  Kernel Version:\t%s\n", info.KernelVersion)
		w.write(level0, "  OS Image:\t%s\n", info.OSImage)
		w.write(level0, "  Operating System:\t%s\n", info.OperatingSystem)
		w.write(level0, "  Architecture:\t%s\n", info.Architecture)
		w.write(level0, "  Container Runtime Version:\t%s\n", info.ContainerRuntimeVersion)
		w.write(level0, "  Kubelet Version:\t%s\n", info.KubeletVersion)
		if s.PodCIDR != "" {
			w.write(level0, "PodCIDR:\t%s\n", s.PodCIDR)
		}
		if len(s.PodCIDRs) > 0 {
			w.write(level0, "PodCIDRs:\t%s\n", strings.Join(s.PodCIDRs, ","))
		}
		if s.ProviderID != "" {
			w.write(level0, "ProviderID:\t%s\n", s.ProviderID)
		}
		nodePods(w, node, pods, now)
		eventsTable(w, events, now)
	})
}

// nodeRoles are the roles node's labels give it, sorted: the NAME of
// each node-role.kubernetes.io/NAME label, and a kubernetes.io/role
// label's value.
func nodeRoles(labels map[string]string) []string {
	const prefix, roleLabel = "node-role.kubernetes.io/", "kubernetes.io/role"
	set := map[string]bool{}
	for k, v := range labels {
		switch {
		case strings.HasPrefix(k, prefix):
			if role := strings.TrimPrefix(k, prefix); role != "" {
				set[role] = true
			}
		case k == roleLabel && v != "":
			set[v] = true
		}
	}
	roles := make([]string, 0, len(set))
	for r := range set {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return roles
}

// taints writes the node's taints sorted by effect then key, one per line.
func taints(w writer, ts []corev1.Taint) {
	w.write(level0, "Taints:\t")
	if len(ts) == 0 {
		w.line("<none>")
		return
	}
	ts = append([]corev1.Taint(nil), ts...)
	key := func(t corev1.Taint) string { return string(t.Effect) + "," + t.Key }
	sort.Slice(ts, func(i, j int) bool { return key(ts[i]) < key(ts[j]) })
	for i, t := range ts {
		if i > 0 {
			w.write(level0, "\t")
		}
		w.write(level0, "%s\n", t.ToString())
	}
}

// nodeLease writes the lease's holder, acquire and renew times.
func nodeLease(w writer, l *coordinationv1.Lease) {
	holder, acquired, renewed := "<unset>", "<unset>", "<unset>"
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		acquired = l.Spec.AcquireTime.Time.Format(time.RFC1123Z)
	}
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time.Format(time.RFC1123Z)
	}
	w.write(level0, "Lease:\n")
	w.write(level1, "HolderIdentity:\t%s\n", holder)
	w.write(level1, "AcquireTime:\t%s\n", acquired)
	w.write(level1, "RenewTime:\t%s\n", renewed)
}

// nodePods writes the Non-terminated Pods table (each pod's cpu and
// memory requests and limits, in-place resizes counted, as a share of
// the node's allocatable, else capacity) and the Allocated resources
// table (their sums for cpu, memory, ephemeral-storage, each hugepages
// size, and each extended resource the node has).
func nodePods(w writer, node *corev1.Node, pods []corev1.Pod, now time.Time) {
	w.write(level0, "Non-terminated Pods:\t(%d in total)\n", len(pods))
	w.write(level1, "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n")
	w.write(level1, "---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n")
	alloc := node.Status.Capacity
	if len(node.Status.Allocatable) > 0 {
		alloc = node.Status.Allocatable
	}
	cpu, mem := alloc.Cpu().MilliValue(), alloc.Memory().Value()
	for i := range pods {
		pod := &pods[i]
		req, lim := podRequests(pod, true), podLimits(pod, true)
		cpuReq, cpuLim := req[corev1.ResourceCPU], lim[corev1.ResourceCPU]
		memReq, memLim := req[corev1.ResourceMemory], lim[corev1.ResourceMemory]
		w.write(level1, "%s\t%s\t\t%s (%d%%)\t%s (%d%%)\t%s (%d%%)\t%s (%d%%)\t%s\n", pod.Namespace, pod.Name,
			cpuReq.String(), percent(cpuReq.MilliValue(), cpu), cpuLim.String(), percent(cpuLim.MilliValue(), cpu),
			memReq.String(), percent(memReq.Value(), mem), memLim.String(), percent(memLim.Value(), mem),
			since(now, pod.CreationTimestamp.Time))
	}

	w.write(level0, "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n")
	w.write(level1, "Resource\tRequests\tLimits\n")
	w.write(level1, "--------\t--------\t------\n")
	reqs, lims := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pods {
		addResources(reqs, podRequests(&pods[i], false))
		addResources(lims, podLimits(&pods[i], false))
	}
	share := func(name corev1.ResourceName, value func(*resource.Quantity) int64) {
		req, lim, a := reqs[name], lims[name], alloc[name]
		w.write(level1, "%s\t%s (%d%%)\t%s (%d%%)\n", name,
			req.String(), guardedPercent(value(&req), value(&a)), lim.String(), guardedPercent(value(&lim), value(&a)))
	}
	milli := (*resource.Quantity).MilliValue
	units := (*resource.Quantity).Value
	share(corev1.ResourceCPU, milli)
	share(corev1.ResourceMemory, units)
	share(corev1.ResourceEphemeralStorage, units)
	var hugePages, extended []string
	for name := range alloc {
		switch {
		case isHugePages(name):
			hugePages = append(hugePages, string(name))
		case name != corev1.ResourceCPU && name != corev1.ResourceMemory &&
			name != corev1.ResourceEphemeralStorage && name != corev1.ResourcePods:
			extended = append(extended, string(name))
		}
	}
	sort.Strings(hugePages)
	sort.Strings(extended)
	for _, name := range hugePages {
		share(corev1.ResourceName(name), units)
	}
	for _, name := range extended {
		req, lim := reqs[corev1.ResourceName(name)], lims[corev1.ResourceName(name)]
		w.write(level1, "%s\t%s\t%s\n", name, req.String(), lim.String())
	}
}

// percent is kubectl's whole percentage of part in total (not guarded
// against a zero total, as kubectl's per-pod columns are not).
func percent(part, total int64) int64 {
	return int64(float64(part) / float64(total) * 100)
}

// guardedPercent is percent, 0 for a zero total.
func guardedPercent(part, total int64) int64 {
	if total == 0 {
		return 0
	}
	return percent(part, total)
}

// podRequests is what the pod requests: its containers' sum, or more
// while an init container runs (with the restartable init containers
// started before it), pod-level requests in place of the containers'
// for cpu, memory and hugepages, plus the pod's overhead. With status,
// a container's request is the largest of its spec, its actuated and its
// allocated resources (of the actuated and allocated ones alone while a
// resize is infeasible), as for an in-place resize.
func podRequests(pod *corev1.Pod, status bool) corev1.ResourceList {
	reqs := aggregate(pod, func(c *corev1.Container, cs *corev1.ContainerStatus) corev1.ResourceList {
		if cs == nil || cs.Resources == nil {
			return c.Resources.Requests
		}
		if resizeInfeasible(pod) {
			return maxOf(cs.Resources.Requests, cs.AllocatedResources)
		}
		return maxOf(c.Resources.Requests, cs.Resources.Requests, cs.AllocatedResources)
	}, status)
	if r := pod.Spec.Resources; r != nil {
		podLevel(reqs, r.Requests)
	}
	addResources(reqs, pod.Spec.Overhead)
	return reqs
}

// podLimits is podRequests for limits, with the overhead added only to
// the limits that are set and not zero, and with status the larger of a
// container's spec and actuated limits (the actuated alone while a
// resize is infeasible).
func podLimits(pod *corev1.Pod, status bool) corev1.ResourceList {
	lims := aggregate(pod, func(c *corev1.Container, cs *corev1.ContainerStatus) corev1.ResourceList {
		if cs == nil || cs.Resources == nil {
			return c.Resources.Limits
		}
		if resizeInfeasible(pod) {
			return cs.Resources.Limits.DeepCopy()
		}
		return maxOf(c.Resources.Limits, cs.Resources.Limits)
	}, status)
	if r := pod.Spec.Resources; r != nil {
		podLevel(lims, r.Limits)
	}
	for name, q := range pod.Spec.Overhead {
		if v, ok := lims[name]; ok && !v.IsZero() {
			v.Add(q)
			lims[name] = v
		}
	}
	return lims
}

// aggregate sums of, for the containers, and takes the largest of that
// and of each init container's of plus that of the restartable init
// containers before it (which add to the sum too). With status, of is
// given a container's status (regular and restartable init containers
// only), else nil.
func aggregate(pod *corev1.Pod, of func(*corev1.Container, *corev1.ContainerStatus) corev1.ResourceList, status bool) corev1.ResourceList {
	statuses := map[string]*corev1.ContainerStatus{}
	if status {
		for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
			for i := range list {
				statuses[list[i].Name] = &list[i]
			}
		}
	}
	sum := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		addResources(sum, of(c, statuses[c.Name]))
	}
	sidecars, inits := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var use corev1.ResourceList
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			r := of(c, statuses[c.Name])
			addResources(sum, r)
			addResources(sidecars, r)
			use = sidecars
		} else {
			use = corev1.ResourceList{}
			addResources(use, of(c, nil))
			addResources(use, sidecars)
		}
		maxResources(inits, use)
	}
	maxResources(sum, inits)
	return sum
}

// podLevel sets list's cpu, memory and hugepages to those of podLevel.
func podLevel(list, podLevel corev1.ResourceList) {
	for name, q := range podLevel {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || isHugePages(name) {
			list[name] = q.DeepCopy()
		}
	}
}

// resizeInfeasible reports whether the pod's PodResizePending condition
// says Infeasible.
func resizeInfeasible(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResizePending {
			return c.Reason == corev1.PodReasonInfeasible
		}
	}
	return false
}

// addResources adds add's quantities to sum's.
func addResources(sum, add corev1.ResourceList) {
	for name, q := range add {
		if v, ok := sum[name]; ok {
			v.Add(q)
			sum[name] = v
		} else {
			sum[name] = q.DeepCopy()
		}
	}
}

// maxResources raises list's quantities to those of other that are larger
// (or missing from list).
func maxResources(list, other corev1.ResourceList) {
	for name, q := range other {
		if v, ok := list[name]; !ok || q.Cmp(v) > 0 {
			list[name] = q.DeepCopy()
		}
	}
}

// maxOf is a copy of first raised to the larger quantities of the others.
func maxOf(first corev1.ResourceList, others ...corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	if first != nil {
		out = first.DeepCopy()
	}
	for _, o := range others {
		maxResources(out, o)
	}
	return out
}
