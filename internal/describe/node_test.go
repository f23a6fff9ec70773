package describe

import (
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestNode(t *testing.T) {
	now := testNow(t)
	for _, c := range nodeCases(now) {
		t.Run(c.golden, func(t *testing.T) {
			before := c.node.DeepCopy()
			var pods []corev1.Pod
			for i := range c.pods {
				pods = append(pods, *c.pods[i].DeepCopy())
			}
			checkGolden(t, c.golden, Node(c.node, c.pods, c.lease, c.leaseErr, shown(c.events), now))
			if diff := cmp.Diff(before, c.node); diff != "" {
				t.Errorf("Node changed its node (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(pods, c.pods); diff != "" {
				t.Errorf("Node changed its pods (-before +after):\n%s", diff)
			}
		})
	}
}

// A lease that does not exist (nil, nil) is shown as kubectl shows the
// NotFound error getting it; another error is shown as it is.
func TestNodeLeaseMissing(t *testing.T) {
	now := testNow(t)
	node := controlPlaneNode(now)
	checkGolden(t, "node_cp-1_no_lease.txt", Node(node, cpPods(now), nil, nil, cpEvents(now, node), now))

	got := Node(workerNode(now), nil, nil, errors.New(`leases.coordination.k8s.io "worker-1" is forbidden`), nil, now)
	if !regexp.MustCompile(`(?m)^Lease: +Failed to get lease: leases.coordination.k8s.io "worker-1" is forbidden$`).MatchString(got) {
		t.Errorf("error not shown for the lease:\n%s", got)
	}
}

// Pod requests and limits: per pod with resizes' status, in total by spec.
func TestPodRequestsAndLimits(t *testing.T) {
	now := testNow(t)
	web := runningPod(now)
	for _, c := range []struct {
		name       string
		got        corev1.ResourceList
		wantCPU    string
		wantMemory string
	}{
		// Containers 250m+100m, sidecar 50m; migrate 100m+50m; status: web 300m.
		{"requests", podRequests(web, false), "400m", "288Mi"},
		{"requests with status", podRequests(web, true), "450m", "288Mi"},
		{"limits", podLimits(web, false), "500m", "448Mi"},
		{"limits with status", podLimits(web, true), "600m", "448Mi"},
	} {
		cpu, mem := c.got[corev1.ResourceCPU], c.got[corev1.ResourceMemory]
		if cpu.String() != c.wantCPU || mem.String() != c.wantMemory {
			t.Errorf("%s: cpu %s memory %s, want %s %s", c.name, cpu.String(), mem.String(), c.wantCPU, c.wantMemory)
		}
	}
}

// fixtures:begin

// nodeCase is a node, its non-terminated pods, lease (or the error
// getting it), events and the golden file of its description.
type nodeCase struct {
	golden   string
	node     *corev1.Node
	pods     []corev1.Pod
	lease    *coordinationv1.Lease
	leaseErr error
	events   []corev1.Event
}

func nodeCases(now time.Time) []nodeCase {
	cp := controlPlaneNode(now)
	worker := workerNode(now)
	notFound := func(n *corev1.Node) error {
		return apierrors.NewNotFound(coordinationv1.Resource("leases"), n.Name)
	}
	return []nodeCase{
		{"node_cp-1.txt", cp, cpPods(now), cpLease(now, cp), nil, cpEvents(now, cp)},
		{"node_cp-1_no_lease.txt", cp, cpPods(now), nil, notFound(cp), cpEvents(now, cp)},
		{"node_worker-1.txt", worker, nil, nil, notFound(worker), nil},
	}
}

// controlPlaneNode is a kubeadm control-plane node as the API server
// returns it.
func controlPlaneNode(now time.Time) *corev1.Node {
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	created := 400 * 24 * time.Hour
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: ago(20 * time.Second), LastTransitionTime: ago(created)}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "cp-1", UID: "5b7d9f1a-3c5e-4a7b-8d9f-1a3c5e7b9d02", ResourceVersion: "99120",
			CreationTimestamp: ago(created),
			Labels: map[string]string{
				"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "cp-1", "kubernetes.io/os": "linux",
				"node-role.kubernetes.io/control-plane":                   "",
				"node.kubernetes.io/exclude-from-external-load-balancers": "",
				"kubernetes.io/role":                                      "master",
				"topology.kubernetes.io/zone":                             "zone-a",
			},
			Annotations: map[string]string{
				"kubeadm.alpha.kubernetes.io/cri-socket":                 "unix:///run/containerd/containerd.sock",
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:    "10.244.0.0/24",
			PodCIDRs:   []string{"10.244.0.0/24", "fd00:10:244::/64"},
			ProviderID: "kind://docker/kind/cp-1",
			Taints: []corev1.Taint{
				{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/maintenance", Value: "soon", Effect: corev1.TaintEffectPreferNoSchedule},
				{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule},
			},
		},
		Status: corev1.NodeStatus{
			Capacity: resourceList("cpu", "4", "memory", "16369488Ki", "ephemeral-storage", "102625208Ki",
				"hugepages-1Gi", "0", "hugepages-2Mi", "256Mi", "pods", "110", "example.com/gpu", "2"),
			Allocatable: resourceList("cpu", "3800m", "memory", "16267088Ki", "ephemeral-storage", "94580335255",
				"hugepages-1Gi", "0", "hugepages-2Mi", "256Mi", "pods", "110", "example.com/gpu", "2"),
			Phase: "",
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "172.18.0.2"},
				{Type: corev1.NodeInternalIP, Address: "fc00:f853:ccd:e793::2"},
				{Type: corev1.NodeHostName, Address: "cp-1"},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: "0f8c3b2a9d7e4f6a8b1c2d3e4f5a6b7c", SystemUUID: "4c4c4544-0042-3510-8051-b4c04f4d3232",
				BootID: "9e8d7c6b-5a4f-4e3d-9c2b-1a0f9e8d7c6b", KernelVersion: "6.8.0-45-generic",
				OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://2.1.3",
				KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64",
			},
		},
	}
}

// workerNode is a cordoned worker whose kubelet stopped posting status,
// with capacity but no allocatable reported.
func workerNode(now time.Time) *corev1.Node {
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	unknown := func(typ corev1.NodeConditionType) corev1.NodeCondition {
		return corev1.NodeCondition{
			Type: typ, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.",
			LastHeartbeatTime: ago(3 * time.Hour), LastTransitionTime: ago(2*time.Hour + 59*time.Minute),
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "worker-1", UID: "7d9f1b3c-5e7a-4c9d-8f1b-3c5e7a9d1f04", CreationTimestamp: ago(3 * 24 * time.Hour),
			Labels: map[string]string{"kubernetes.io/hostname": "worker-1", "kubernetes.io/os": "linux", "node-role.kubernetes.io/": ""},
		},
		Spec: corev1.NodeSpec{
			Unschedulable: true,
			Taints: []corev1.Taint{
				{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule, TimeAdded: ptrTo(ago(3 * time.Hour))},
				{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute, TimeAdded: ptrTo(ago(2*time.Hour + 58*time.Minute))},
				{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoSchedule, TimeAdded: ptrTo(ago(2*time.Hour + 58*time.Minute))},
			},
		},
		Status: corev1.NodeStatus{
			Capacity:   resourceList("cpu", "2", "memory", "4Gi", "pods", "110"),
			Conditions: []corev1.NodeCondition{unknown(corev1.NodeReady)},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.3"}},
		},
	}
}

func cpLease(now time.Time, node *corev1.Node) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptrTo(node.Name),
			LeaseDurationSeconds: ptrTo[int32](40),
			RenewTime:            ptrTo(metav1.NewMicroTime(now.Add(-4 * time.Second))),
		},
	}
}

// cpPods are cp-1's non-terminated pods in the API server's order (by
// namespace and name): a terminating one with pod-level resources, a
// static one, one with an overhead, and one with init containers and a
// resize.
func cpPods(now time.Time) []corev1.Pod {
	etcd := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "etcd-cp-1", Namespace: "kube-system", UID: "3e5a7c9d-1f2b-4d6e-8a0c-5e7a9c1d3f46",
			CreationTimestamp: metav1.NewTime(now.Add(-400*24*time.Hour + 30*time.Second)),
			Annotations:       map[string]string{corev1.MirrorPodAnnotationKey: "5d41402abc4b2a76b9719d911017c592"},
		},
		Spec: corev1.PodSpec{
			NodeName:          "cp-1",
			PriorityClassName: "system-node-critical",
			Containers: []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.4-0",
				Resources: corev1.ResourceRequirements{Requests: resourceList("cpu", "100m", "memory", "100Mi")}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable},
	}
	exporter := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "node-exporter-5xk2p", Namespace: "monitoring", UID: "4f6b8d0e-2a3c-4e7f-9b1d-6f8b0d2e4a57",
			CreationTimestamp: metav1.NewTime(now.Add(-26 * time.Minute)),
		},
		Spec: corev1.PodSpec{
			NodeName:         "cp-1",
			RuntimeClassName: ptrTo("kata"),
			Overhead:         resourceList("cpu", "100m", "memory", "50Mi"),
			Containers: []corev1.Container{{Name: "node-exporter", Image: "quay.io/prometheus/node-exporter:v1.8.2",
				Resources: corev1.ResourceRequirements{Requests: resourceList("cpu", "10m"), Limits: resourceList("cpu", "200m")}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable},
	}
	return []corev1.Pod{*terminatingPod(now), *etcd, *exporter, *runningPod(now)}
}

// cpEvents are events about node: the controller's name it by UID, the
// kubelet's by name.
func cpEvents(now time.Time, node *corev1.Node) []corev1.Event {
	byName := &metav1.ObjectMeta{Name: node.Name, UID: types.UID(node.Name)}
	return []corev1.Event{
		event(now, node, "Node", "", corev1.EventTypeNormal, "RegisteredNode", "node-controller",
			"Node cp-1 event: Registered Node cp-1 in Controller", 1, 399*24*time.Hour, 399*24*time.Hour),
		event(now, byName, "Node", "", corev1.EventTypeNormal, "Starting", "kubelet", "Starting kubelet.", 1, 400*24*time.Hour, 400*24*time.Hour),
		event(now, byName, "Node", "", corev1.EventTypeNormal, "NodeHasSufficientMemory", "kubelet",
			"Node cp-1 status is now: NodeHasSufficientMemory", 8, 400*24*time.Hour, 3*time.Hour+20*time.Minute),
		event(now, byName, "Node", "", corev1.EventTypeWarning, "InvalidDiskCapacity", "kubelet",
			"invalid capacity 0 on image filesystem", 2, 400*24*time.Hour+10*time.Second, 2*24*time.Hour+5*time.Hour),
	}
}

// fixtures:end
