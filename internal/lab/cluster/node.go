package cluster

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// Node is node i of a lab of stack s as a kubelet registers it: a pod CIDR
// and an InternalIP per family, the primary family's first (spec.podCIDR is
// the first, as the node IPAM controller sets it).
func Node(s topology.Stack, i int) *corev1.Node {
	name := topology.NodeName(i)
	cidrs := s.PodCIDRs(i)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
		}},
		Spec: corev1.NodeSpec{PodCIDR: cidrs[0].String()},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	for _, c := range cidrs {
		node.Spec.PodCIDRs = append(node.Spec.PodCIDRs, c.String())
	}
	for _, a := range s.NodeAddrs(i) {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.String()})
	}
	node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return node
}
