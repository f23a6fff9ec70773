package describe

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// containers writes the section label ("label: <none>" without
// containers) and each container's block: image, ports, command, and
// with its status (matched by name) state, readiness and restarts, then
// resources, probes, environment and mounts.
func containers(w writer, label string, cs []corev1.Container, statuses []corev1.ContainerStatus, pod *corev1.Pod) {
	byName := make(map[string]corev1.ContainerStatus, len(statuses))
	for _, st := range statuses {
		byName[st.Name] = st
	}
	if len(cs) == 0 {
		w.write(level0, "%s: <none>\n", label)
	} else {
		w.write(level0, "%s:\n", label)
	}
	for _, c := range cs {
		st, ok := byName[c.Name]
		w.write(level1, "%v:\n", c.Name)
		if ok {
			w.write(level2, "Container ID:\t%s\n", st.ContainerID)
		}
		w.write(level2, "Image:\t%s\n", c.Image)
		if ok {
			w.write(level2, "Image ID:\t%s\n", st.ImageID)
		}
		portsLine(w, "Port", c.Ports, func(p corev1.ContainerPort) int32 { return p.ContainerPort })
		portsLine(w, "Host Port", c.Ports, func(p corev1.ContainerPort) int32 { return p.HostPort })
		if c.SecurityContext != nil {
			seccomp(w, level2, level3, c.SecurityContext.SeccompProfile)
		}
		lines(w, "Command", c.Command)
		lines(w, "Args", c.Args)
		if ok {
			state(w, "State", st.State)
			if st.LastTerminationState.Terminated != nil {
				state(w, "Last State", st.LastTerminationState)
			}
			w.write(level2, "Ready:\t%v\n", boolString(st.Ready))
			w.write(level2, "Restart Count:\t%d\n", st.RestartCount)
		}
		resources(w, level2, &c.Resources)
		for _, p := range []struct {
			title string
			probe *corev1.Probe
		}{{"Liveness", c.LivenessProbe}, {"Readiness", c.ReadinessProbe}, {"Startup", c.StartupProbe}} {
			if p.probe != nil {
				w.write(level2, "%s:\t%s\n", p.title, probe(p.probe))
			}
		}
		if len(c.EnvFrom) > 0 {
			envFrom(w, c.EnvFrom)
		}
		env(w, &c, pod)
		mounts(w, c)
	}
}

// portsLine writes the container's ports (number by port) as "title:"
// for at most one, "titles:" for more.
func portsLine(w writer, title string, ports []corev1.ContainerPort, number func(corev1.ContainerPort) int32) {
	list := make([]string, len(ports))
	for i, p := range ports {
		list[i] = fmt.Sprintf("%d/%s", number(p), p.Protocol)
		if p.Name != "" {
			list[i] += " (" + p.Name + ")"
		}
	}
	s := strings.Join(list, ", ")
	if strings.Contains(s, ",") {
		w.write(level2, "%ss:\t%s\n", title, s)
	} else {
		w.write(level2, "%s:\t%s\n", title, orNone(s))
	}
}

// lines writes title and each of the values' lines, when there are values.
func lines(w writer, title string, values []string) {
	if len(values) == 0 {
		return
	}
	w.write(level2, "%s:\n", title)
	for _, v := range values {
		for _, s := range strings.Split(v, "\n") {
			w.write(level3, "%s\n", s)
		}
	}
}

// resources writes limits and requests, each sorted by name, at level.
func resources(w writer, level int, r *corev1.ResourceRequirements) {
	for _, l := range []struct {
		title string
		list  corev1.ResourceList
	}{{"Limits", r.Limits}, {"Requests", r.Requests}} {
		if len(l.list) > 0 {
			w.write(level, "%s:\n", l.title)
		}
		for _, name := range sortedResourceNames(l.list) {
			q := l.list[name]
			w.write(level+1, "%s:\t%s\n", name, q.String())
		}
	}
}

// sortedResourceNames are list's names in ascending order.
func sortedResourceNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for name := range list {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// state writes a container state under title.
func state(w writer, title string, s corev1.ContainerState) {
	switch {
	case s.Running != nil:
		w.write(level2, "%s:\tRunning\n", title)
		w.write(level3, "Started:\t%v\n", rfc1123z(s.Running.StartedAt))
	case s.Waiting != nil:
		w.write(level2, "%s:\tWaiting\n", title)
		if s.Waiting.Reason != "" {
			w.write(level3, "Reason:\t%s\n", s.Waiting.Reason)
		}
	case s.Terminated != nil:
		t := s.Terminated
		w.write(level2, "%s:\tTerminated\n", title)
		if t.Reason != "" {
			w.write(level3, "Reason:\t%s\n", t.Reason)
		}
		if t.Message != "" {
			w.write(level3, "Message:\t%s\n", t.Message)
		}
		w.write(level3, "Exit Code:\t%d\n", t.ExitCode)
		if t.Signal > 0 {
			w.write(level3, "Signal:\t%d\n", t.Signal)
		}
		w.write(level3, "Started:\t%s\n", rfc1123z(t.StartedAt))
		w.write(level3, "Finished:\t%s\n", rfc1123z(t.FinishedAt))
	default:
		w.write(level2, "%s:\tWaiting\n", title)
	}
}

// probe is a probe's one-line summary: its action and timings.
func probe(p *corev1.Probe) string {
	attrs := fmt.Sprintf("delay=%ds timeout=%ds period=%ds #success=%d #failure=%d",
		p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
	switch {
	case p.Exec != nil:
		return fmt.Sprintf("exec %v %s", p.Exec.Command, attrs)
	case p.HTTPGet != nil:
		u := url.URL{Scheme: strings.ToLower(string(p.HTTPGet.Scheme)), Host: p.HTTPGet.Host, Path: p.HTTPGet.Path}
		if port := p.HTTPGet.Port.String(); port != "" {
			u.Host = net.JoinHostPort(p.HTTPGet.Host, port)
		}
		return fmt.Sprintf("http-get %s %s", u.String(), attrs)
	case p.TCPSocket != nil:
		return fmt.Sprintf("tcp-socket %s:%s %s", p.TCPSocket.Host, p.TCPSocket.Port.String(), attrs)
	case p.GRPC != nil:
		return fmt.Sprintf("grpc <pod>:%d %s %s", p.GRPC.Port, deref(p.GRPC.Service), attrs)
	}
	return "unknown " + attrs
}

// envFrom writes the container's envFrom sources.
func envFrom(w writer, sources []corev1.EnvFromSource) {
	w.write(level2, "Environment Variables from:\n")
	for _, e := range sources {
		var from, name string
		var optional *bool
		switch {
		case e.ConfigMapRef != nil:
			from, name, optional = "ConfigMap", e.ConfigMapRef.Name, e.ConfigMapRef.Optional
		case e.SecretRef != nil:
			from, name, optional = "Secret", e.SecretRef.Name, e.SecretRef.Optional
		}
		if e.Prefix == "" {
			w.write(level3, "%s\t%s\tOptional: %t\n", name, from, isTrue(optional))
		} else {
			w.write(level3, "%s\t%s with prefix '%s'\tOptional: %t\n", name, from, e.Prefix, isTrue(optional))
		}
	}
}

// env writes the container's environment variables, a multi-line value
// on continuation lines, a reference with what kubectl resolves of it.
func env(w writer, c *corev1.Container, pod *corev1.Pod) {
	if len(c.Env) == 0 {
		w.write(level2, "Environment:\t<none>\n")
	} else {
		w.write(level2, "Environment:\n")
	}
	for _, e := range c.Env {
		from := e.ValueFrom
		switch {
		case from == nil:
			for i, s := range strings.Split(e.Value, "\n") {
				if i == 0 {
					w.write(level3, "%s:\t%s\n", e.Name, s)
				} else {
					w.write(level3, "\t%s\n", s)
				}
			}
		case from.FieldRef != nil:
			w.write(level3, "%s:\t%s (%s:%s)\n", e.Name, fieldRefValue(pod, from.FieldRef), from.FieldRef.APIVersion, from.FieldRef.FieldPath)
		case from.ResourceFieldRef != nil:
			r := from.ResourceFieldRef.Resource
			v := resourceFieldValue(from.ResourceFieldRef, c)
			if v == "0" && (r == "limits.cpu" || r == "limits.memory") {
				v = "node allocatable"
			}
			w.write(level3, "%s:\t%s (%s)\n", e.Name, v, r)
		case from.SecretKeyRef != nil:
			ref := from.SecretKeyRef
			w.write(level3, "%s:\t<set to the key '%s' in secret '%s'>\tOptional: %t\n", e.Name, ref.Key, ref.Name, isTrue(ref.Optional))
		case from.ConfigMapKeyRef != nil:
			ref := from.ConfigMapKeyRef
			w.write(level3, "%s:\t<set to the key '%s' of config map '%s'>\tOptional: %t\n", e.Name, ref.Key, ref.Name, isTrue(ref.Optional))
		}
	}
}

// fieldRefValue is what kubectl shows of a fieldRef's value: the pod's
// name or namespace. kubectl converts the path with its scheme's field
// label conversion, which for a v1 Pod knows only those two, so any
// other path (and an unparsable apiVersion) shows empty.
func fieldRefValue(pod *corev1.Pod, ref *corev1.ObjectFieldSelector) string {
	if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
		return ""
	}
	switch ref.FieldPath {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	}
	return ""
}

// resourceFieldValue is the container's limit or request that a
// resourceFieldRef names (cpu, memory, ephemeral-storage, hugepages-*),
// divided by its divisor (default 1) and rounded up; "" for another.
func resourceFieldValue(ref *corev1.ResourceFieldSelector, c *corev1.Container) string {
	divisor := ref.Divisor
	if divisor.Cmp(resource.Quantity{}) == 0 {
		divisor = resource.MustParse("1")
	}
	var list corev1.ResourceList
	var name corev1.ResourceName
	switch r := ref.Resource; {
	case strings.HasPrefix(r, "limits."):
		list, name = c.Resources.Limits, corev1.ResourceName(strings.TrimPrefix(r, "limits."))
	case strings.HasPrefix(r, "requests."):
		list, name = c.Resources.Requests, corev1.ResourceName(strings.TrimPrefix(r, "requests."))
	default:
		return ""
	}
	q := list.Name(name, resource.DecimalSI)
	var ratio float64
	switch {
	case name == corev1.ResourceCPU:
		ratio = float64(q.MilliValue()) / float64(divisor.MilliValue())
	case name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage, isHugePages(name):
		ratio = float64(q.Value()) / float64(divisor.Value())
	default:
		return ""
	}
	return strconv.FormatInt(int64(math.Ceil(ratio)), 10)
}

// mounts writes the container's volume mounts, and its volume devices if
// any, each sorted by path.
func mounts(w writer, c corev1.Container) {
	none := ""
	if len(c.VolumeMounts) == 0 {
		none = "\t<none>"
	}
	w.write(level2, "Mounts:%s\n", none)
	ms := append([]corev1.VolumeMount(nil), c.VolumeMounts...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].MountPath < ms[j].MountPath })
	for _, m := range ms {
		flags := "rw"
		if m.ReadOnly {
			flags = "ro"
		}
		if m.SubPath != "" {
			flags += fmt.Sprintf(",path=%q", m.SubPath)
		}
		w.write(level3, "%s from %s (%s)\n", m.MountPath, m.Name, flags)
	}
	if len(c.VolumeDevices) > 0 {
		w.write(level2, "Devices:%s\n", none)
		ds := append([]corev1.VolumeDevice(nil), c.VolumeDevices...)
		sort.Slice(ds, func(i, j int) bool { return ds[i].DevicePath < ds[j].DevicePath })
		for _, d := range ds {
			w.write(level3, "%s from %s\n", d.DevicePath, d.Name)
		}
	}
}
