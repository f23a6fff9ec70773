package describe

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod returns kubectl describe's text of pod, given its events, ages
// (the events', a deletion's) counted at now. As kubectl, it resolves an
// env var's fieldRef only for metadata.name and metadata.namespace, and
// shows the legacy in-tree volume types as "<unknown>" (see volumes).
// Where kubectl would dereference a nil pointer that the API server
// always sets (a deletion's grace period, a token's expiry, a gRPC
// probe's service, a localhost seccomp profile), Pod shows its zero
// value, or for the token nothing.
func Pod(pod *corev1.Pod, events []corev1.Event, now time.Time) string {
	return tabbed(func(w writer) {
		s, st := &pod.Spec, &pod.Status
		w.write(level0, "Name:\t%s\n", pod.Name)
		w.write(level0, "Namespace:\t%s\n", pod.Namespace)
		if s.Priority != nil {
			w.write(level0, "Priority:\t%d\n", *s.Priority)
		}
		if s.PriorityClassName != "" {
			w.write(level0, "Priority Class Name:\t%s\n", s.PriorityClassName)
		}
		if s.RuntimeClassName != nil && *s.RuntimeClassName != "" {
			w.write(level0, "Runtime Class Name:\t%s\n", *s.RuntimeClassName)
		}
		if s.ServiceAccountName != "" {
			w.write(level0, "Service Account:\t%s\n", s.ServiceAccountName)
		}
		if s.NodeName == "" {
			w.write(level0, "Node:\t<none>\n")
		} else {
			w.write(level0, "Node:\t%s\n", s.NodeName+"/"+st.HostIP)
		}
		if st.StartTime != nil {
			w.write(level0, "Start Time:\t%s\n", rfc1123z(*st.StartTime))
		}
		labelsBlock(w, "Labels", pod.Labels)
		annotationsBlock(w, "Annotations", pod.Annotations)
		if pod.DeletionTimestamp != nil && st.Phase != corev1.PodFailed && st.Phase != corev1.PodSucceeded {
			w.write(level0, "Status:\tTerminating (lasts %s)\n", since(now, pod.DeletionTimestamp.Time))
			var grace int64
			if pod.DeletionGracePeriodSeconds != nil {
				grace = *pod.DeletionGracePeriodSeconds
			}
			w.write(level0, "Termination Grace Period:\t%ds\n", grace)
		} else {
			w.write(level0, "Status:\t%s\n", st.Phase)
		}
		if st.Reason != "" {
			w.write(level0, "Reason:\t%s\n", st.Reason)
		}
		if st.Message != "" {
			w.write(level0, "Message:\t%s\n", st.Message)
		}
		if s.SecurityContext != nil {
			seccomp(w, level0, level0, s.SecurityContext.SeccompProfile)
		}
		w.write(level0, "IP:\t%s\n", st.PodIP)
		if len(st.PodIPs) == 0 {
			w.write(level0, "IPs:\t<none>\n")
		} else {
			w.write(level0, "IPs:\n")
			for _, ip := range st.PodIPs {
				w.write(level1, "IP:\t%s\n", ip.IP)
			}
		}
		if ref := metav1.GetControllerOf(pod); ref != nil {
			w.write(level0, "Controlled By:\t%s/%s\n", ref.Kind, ref.Name)
		}
		if st.NominatedNodeName != "" {
			w.write(level0, "NominatedNodeName:\t%s\n", st.NominatedNodeName)
		}
		if s.Resources != nil {
			w.write(level0, "Resources:\n")
			resources(w, level1, s.Resources)
		}
		if len(s.InitContainers) > 0 {
			containers(w, "Init Containers", s.InitContainers, st.InitContainerStatuses, pod)
		}
		containers(w, "Containers", s.Containers, st.ContainerStatuses, pod)
		if len(s.EphemeralContainers) > 0 {
			ec := make([]corev1.Container, len(s.EphemeralContainers))
			for i, c := range s.EphemeralContainers {
				ec[i] = corev1.Container(c.EphemeralContainerCommon)
			}
			containers(w, "Ephemeral Containers", ec, st.EphemeralContainerStatuses, pod)
		}
		if len(s.ReadinessGates) > 0 {
			w.write(level0, "Readiness Gates:\n  Type\tStatus\n")
			for _, g := range s.ReadinessGates {
				status := "<none>"
				for _, c := range st.Conditions {
					if c.Type == g.ConditionType {
						status = string(c.Status)
						break
					}
				}
				w.write(level1, "%v \t%v \n", g.ConditionType, status)
			}
		}
		if len(st.Conditions) > 0 {
			w.write(level0, "Conditions:\n  Type\tStatus\n")
			for _, c := range st.Conditions {
				w.write(level1, "%v \t%v \n", c.Type, c.Status)
			}
		}
		volumes(w, s.Volumes)
		w.write(level0, "QoS Class:\t%s\n", qosClass(pod))
		labelsBlock(w, "Node-Selectors", s.NodeSelector)
		tolerations(w, s.Tolerations)
		topologySpread(w, s.TopologySpreadConstraints)
		if g := s.SchedulingGroup; g != nil {
			w.write(level0, "SchedulingGroup:\n")
			w.write(level1, "PodGroupName:\t%s\n", deref(g.PodGroupName))
		}
		eventsTable(w, events, now)
	})
}

// seccomp writes a seccomp profile's type at level and a localhost
// profile's path at pathLevel; nothing for no profile.
func seccomp(w writer, level, pathLevel int, p *corev1.SeccompProfile) {
	if p == nil {
		return
	}
	w.write(level, "SeccompProfile:\t%s\n", p.Type)
	if p.Type == corev1.SeccompProfileTypeLocalhost {
		w.write(pathLevel, "LocalhostProfile:\t%s\n", deref(p.LocalhostProfile))
	}
}

// qosClass is the pod's status.qosClass, or else the class that the cpu
// and memory of its containers' (or its pod-level) requests and limits
// make it: BestEffort with none, Guaranteed when each container (or the
// pod) limits both and requests equal limits, else Burstable.
func qosClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	add := func(r corev1.ResourceRequirements) {
		qosAdd(requests, r.Requests)
		qosAdd(limits, r.Limits)
		if own := (corev1.ResourceList{}); qosAdd(own, r.Limits) < 2 {
			guaranteed = false
		}
	}
	if pod.Spec.Resources != nil {
		add(*pod.Spec.Resources)
	} else {
		for _, c := range pod.Spec.Containers {
			add(c.Resources)
		}
		for _, c := range pod.Spec.InitContainers {
			add(c.Resources)
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	for name, req := range requests {
		if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
			guaranteed = false
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// qosAdd adds list's positive cpu and memory quantities to sum and
// returns how many it added.
func qosAdd(sum, list corev1.ResourceList) int {
	n := 0
	for name, q := range list {
		if (name != corev1.ResourceCPU && name != corev1.ResourceMemory) || q.Sign() != 1 {
			continue
		}
		n++
		d := q.DeepCopy()
		if prev, ok := sum[name]; ok {
			d.Add(prev)
		}
		sum[name] = d
	}
	return n
}

// tolerations writes the pod's tolerations sorted by key, one per line.
func tolerations(w writer, ts []corev1.Toleration) {
	w.write(level0, "Tolerations:\t")
	if len(ts) == 0 {
		w.line("<none>")
		return
	}
	ts = append([]corev1.Toleration(nil), ts...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Key < ts[j].Key })
	for i, t := range ts {
		if i > 0 {
			w.write(level0, "\t")
		}
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		if t.Operator == corev1.TolerationOpExists && t.Value == "" {
			if t.Key != "" || t.Effect != "" {
				s += " "
			}
			s += "op=Exists"
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		w.write(level0, "%s\n", s)
	}
}

// topologySpread writes the pod's topology spread constraints sorted by
// topology key, nothing when there are none.
func topologySpread(w writer, tscs []corev1.TopologySpreadConstraint) {
	if len(tscs) == 0 {
		return
	}
	tscs = append([]corev1.TopologySpreadConstraint(nil), tscs...)
	sort.Slice(tscs, func(i, j int) bool { return tscs[i].TopologyKey < tscs[j].TopologyKey })
	w.write(level0, "Topology Spread Constraints:\t")
	for i, c := range tscs {
		if i > 0 {
			w.write(level0, "\t")
		}
		s := fmt.Sprintf("%s:%v when max skew %d is exceeded", c.TopologyKey, c.WhenUnsatisfiable, c.MaxSkew)
		if c.LabelSelector != nil {
			s += " for selector " + metav1.FormatLabelSelector(c.LabelSelector)
		}
		w.write(level0, "%s\n", s)
	}
}

// isHugePages reports whether name is a hugepages-<size> resource.
func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func boolString(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func isTrue(b *bool) bool { return b != nil && *b }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
