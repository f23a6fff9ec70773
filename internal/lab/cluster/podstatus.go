package cluster

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodStatus is what the kubelet reports for a started, ready pod.
func PodStatus(ips []netip.Addr, hostIP netip.Addr, pod *corev1.Pod) corev1.PodStatus {
	now := metav1.Now()
	st := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    hostIP.String(),
		HostIPs:   []corev1.HostIP{{IP: hostIP.String()}},
		PodIP:     ips[0].String(),
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	for _, ip := range ips {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip.String()})
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptrTo(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return st
}

func ptrTo[T any](v T) *T { return &v }
