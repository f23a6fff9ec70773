package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodServerPorts(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 53, Protocol: corev1.ProtocolTCP, HostPort: 5353}}},
		{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 9, Protocol: corev1.ProtocolSCTP}}},
	}}}
	tcp, udp := ServerPorts(pod)
	if len(tcp) != 2 || tcp[0] != 53 || tcp[1] != 80 || len(udp) != 1 || udp[0] != 53 {
		t.Errorf("serverPorts = %v %v; want [53 80] [53]", tcp, udp)
	}
}
