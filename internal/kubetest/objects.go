package kubetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// callTimeout bounds each API call a helper makes.
const callTimeout = 30 * time.Second

// CreateNamespace creates the namespace name and fails t on error.
func CreateNamespace(t testing.TB, c kubernetes.Interface, name string) *corev1.Namespace {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: create namespace %s: %v", name, err)
	}
	return ns
}

// Node describes a Node as a kubelet and node-ipam would have left it.
type Node struct {
	Name string
	// InternalIPs become status.addresses of type InternalIP (plus one Hostname).
	InternalIPs []string
	// PodCIDRs is spec.podCIDRs (spec.podCIDR is the first).
	PodCIDRs []string
	Labels   map[string]string
	// Ready sets the NodeReady condition to True (else False).
	Ready bool
}

// CreateNode creates a Node with its spec, then writes its status (addresses and
// the Ready condition) through the status subresource, and fails t on error. It
// returns the Node as stored.
func CreateNode(t testing.TB, c kubernetes.Interface, n Node) *corev1.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
	if len(n.PodCIDRs) > 0 {
		node.Spec.PodCIDR = n.PodCIDRs[0]
		node.Spec.PodCIDRs = n.PodCIDRs
	}
	created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: create node %s: %v", n.Name, err)
	}
	created.Status = NodeStatus(n)
	updated, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("kubetest: update status of node %s: %v", n.Name, err)
	}
	return updated
}

// NodeStatus returns the status CreateNode writes for n.
func NodeStatus(n Node) corev1.NodeStatus {
	var st corev1.NodeStatus
	for _, ip := range n.InternalIPs {
		st.Addresses = append(st.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	st.Addresses = append(st.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
	ready := corev1.ConditionFalse
	if n.Ready {
		ready = corev1.ConditionTrue
	}
	now := metav1.Now()
	st.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: ready, Reason: "KubetestSet",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	return st
}

// SetPodStatus makes the Pod namespace/name look as a kubelet would report it:
// phase Running, status.podIP(s) = ips, and the PodReady and ContainersReady
// conditions set to ready. It fails t on error and returns the updated Pod. The
// Pod needs spec.nodeName (there is no scheduler) for the EndpointSlice controller
// to place its endpoint; the Node must exist.
func SetPodStatus(t testing.TB, c kubernetes.Interface, namespace, name string, ready bool, ips ...string) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	pod, err := c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubetest: get pod %s/%s: %v", namespace, name, err)
	}
	pod.Status = PodStatus(ready, ips...)
	updated, err := c.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("kubetest: update status of pod %s/%s: %v", namespace, name, err)
	}
	return updated
}

// PodStatus returns the status SetPodStatus writes.
func PodStatus(ready bool, ips ...string) corev1.PodStatus {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	now := metav1.Now()
	st := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: cond, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: cond, LastTransitionTime: now},
		},
	}
	if len(ips) > 0 {
		st.PodIP = ips[0]
	}
	for _, ip := range ips {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
	}
	return st
}

// pollInterval is how often Eventually and Wait check their condition.
const pollInterval = 50 * time.Millisecond

// Eventually calls cond every 50ms until it reports done or timeout passes, then
// fails t naming what was awaited and cond's last message.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (done bool, msg string)) {
	t.Helper()
	if err := Wait(timeout, cond); err != nil {
		t.Fatalf("kubetest: waiting for %s: %v", what, err)
	}
}

// Wait is Eventually returning an error instead of failing a test.
func Wait(timeout time.Duration, cond func() (done bool, msg string)) error {
	deadline := time.Now().Add(timeout)
	msg := ""
	for n := 0; ; n++ {
		var done bool
		if done, msg = cond(); done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v (%d tries): %s", timeout, n+1, msg)
		}
		time.Sleep(pollInterval)
	}
}
