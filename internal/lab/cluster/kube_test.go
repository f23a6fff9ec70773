package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A re-applied Service keeps what the apiserver allocated unless it asks for other.
func TestKeepAllocations(t *testing.T) {
	old := &corev1.Service{Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"}, HealthCheckNodePort: 32000,
		Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}, {Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053}},
	}}
	old.ResourceVersion = "7"
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 31000},
	}}}
	keepAllocations(svc, old)
	if svc.ResourceVersion != "7" || svc.Spec.ClusterIP != "10.96.0.20" || svc.Spec.HealthCheckNodePort != 32000 {
		t.Errorf("allocations not kept: %+v", svc.Spec)
	}
	if got := [3]int32{svc.Spec.Ports[0].NodePort, svc.Spec.Ports[1].NodePort, svc.Spec.Ports[2].NodePort}; got != [3]int32{30080, 0, 31000} {
		t.Errorf("node ports = %v; want [30080 0 31000] (TCP/80 kept, new TCP/53 none, requested UDP/53 kept)", got)
	}
}
