package topology

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodPortMappings(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 53, Protocol: corev1.ProtocolTCP, HostPort: 5353}}},
		{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 9, Protocol: corev1.ProtocolSCTP}}},
	}}}
	pm := portMappings(pod)
	if len(pm) != 1 || pm[0]["hostPort"] != int32(5353) || pm[0]["containerPort"] != int32(53) || pm[0]["protocol"] != "tcp" {
		t.Errorf("portMappings = %v", pm)
	}
	if id := containerID("default", "a"); id == containerID("default", "b") || id != containerID("default", "a") || len(id) != 32 {
		t.Error("containerID must be stable per pod and differ between pods")
	}
}
