package cluster

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// Node is node i as a kubelet registers it.
func Node(i int) *corev1.Node {
	name := topology.NodeName(i)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
		}},
		Spec: corev1.NodeSpec{PodCIDR: topology.PodCIDR(i).String(), PodCIDRs: []string{topology.PodCIDR(i).String()}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: topology.NodeAddr(i).String()},
				{Type: corev1.NodeHostName, Address: name},
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
}
