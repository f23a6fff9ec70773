package lab

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPlan(t *testing.T) {
	for i, want := range map[int]string{1: "172.26.236.177", 3: "172.26.236.179", 4: "172.26.236.200", MaxNodes: "172.26.236.253"} {
		if got := NodeAddr(i).String(); got != want {
			t.Errorf("NodeAddr(%d) = %s, want %s", i, got, want)
		}
	}
	if got := PodCIDR(2).String(); got != "192.168.2.0/24" {
		t.Errorf("PodCIDR(2) = %s", got)
	}
	if got := Gateway4(2).String(); got != "192.168.2.1" {
		t.Errorf("Gateway4(2) = %s", got)
	}
	for name, want := range map[string]int{"node1": 1, "node12": 12, "node": 0, "node01": 0, "client": 0, "node-1": 0} {
		if got := NodeIndex(name); got != want {
			t.Errorf("NodeIndex(%q) = %d, want %d", name, got, want)
		}
	}
	for _, ok := range []string{"svcnet", "e2e123-kube", "a"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "-a", "A", "a_b", "abcdefghijabcdefghijabcdefghijabc"} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("ValidateName(%q) accepted", bad)
		}
	}
	n := Names{Lab: "x"}
	if !n.Owns(n.Pod("default", "p")) || !n.Owns(n.Node(1)) || (Names{Lab: "x-2"}).Owns(n.Node(1)) || n.Owns("x-2.node1") {
		t.Error("Owns must tell one lab's namespaces from another's")
	}
}

func TestPodPortsAndMappings(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 53, Protocol: corev1.ProtocolTCP, HostPort: 5353}}},
		{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 9, Protocol: corev1.ProtocolSCTP}}},
	}}}
	tcp, udp := serverPorts(pod)
	if len(tcp) != 2 || tcp[0] != 53 || tcp[1] != 80 || len(udp) != 1 || udp[0] != 53 {
		t.Errorf("serverPorts = %v %v; want [53 80] [53]", tcp, udp)
	}
	pm := portMappings(pod)
	if len(pm) != 1 || pm[0]["hostPort"] != int32(5353) || pm[0]["containerPort"] != int32(53) || pm[0]["protocol"] != "tcp" {
		t.Errorf("portMappings = %v", pm)
	}
	if id := containerID("default", "a"); id == containerID("default", "b") || id != containerID("default", "a") || len(id) != 32 {
		t.Error("containerID must be stable per pod and differ between pods")
	}
}

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
