package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// holdFinalizer keeps the Node in the apiserver after its deletion, with a
// deletion timestamp, as a node drain or a cloud controller would.
const holdFinalizer = "svcnet.test/hold"

// TestKubeHealthzNodeEligible is the kube tier of kube-proxy's /healthz node
// eligibility: a real kube-apiserver holds this node's Node; the proxy in the
// node namespace answers /healthz 503 with "nodeEligible":false while the
// Node is tainted ToBeDeletedByClusterAutoscaler or has a deletion
// timestamp, 200 otherwise, and /livez stays 200 throughout (kube-proxy's
// /livez ignores the node), so an external load balancer drains a node that
// is going away while the kubelet keeps the proxy running.
func TestKubeHealthzNodeEligible(t *testing.T) {
	needBinary(t)
	env := kubetest.Start(t, kubetest.Options{})
	api := env.Client
	c := newCluster(t)
	kubetest.CreateNode(t, api, kubetest.Node{
		Name: nodeName, InternalIPs: []string{nodeIP.String()}, PodCIDRs: []string{"192.168.1.0/24"}, Ready: true,
	})
	kubeconfig := relayKubeconfig(t, env, c.node)
	proxy := c.spawn(c.proxyArgsFrom("--kubeconfig", kubeconfig)...)
	proxy.waitLog(t, 30*time.Second, 0, reSyncComplete)

	expect := func(what string, healthz int) {
		t.Helper()
		eligible := healthz == 200
		eventually(t, 20*time.Second, what, func() (bool, string) {
			var got []string
			ok := true
			for path, want := range map[string]int{"/healthz": healthz, "/livez": 200} {
				resp, body, err := httpGet(c.node, "http://127.0.0.1:10256"+path, 2*time.Second)
				if err != nil {
					return false, fmt.Sprintf("GET %s: %v", path, err)
				}
				got = append(got, fmt.Sprintf("%s %d %s", path, resp.StatusCode, body))
				var h struct {
					NodeEligible *bool `json:"nodeEligible"`
					Healthy      bool  `json:"healthy"`
				}
				if err := json.Unmarshal([]byte(body), &h); err != nil {
					return false, fmt.Sprintf("GET %s: body %q: %v", path, body, err)
				}
				switch path {
				case "/healthz":
					ok = ok && resp.StatusCode == want && h.NodeEligible != nil && *h.NodeEligible == eligible && h.Healthy
				case "/livez":
					ok = ok && resp.StatusCode == want && h.NodeEligible == nil && h.Healthy
				}
			}
			return ok, strings.Join(got, "; ")
		})
	}
	expect("/healthz 200 for a plain Node", 200)

	setTaints(t, api, corev1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1700000000", Effect: corev1.TaintEffectNoSchedule})
	expect("/healthz 503 once the Node is tainted ToBeDeletedByClusterAutoscaler", 503)
	setTaints(t, api, corev1.Taint{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule})
	expect("/healthz 200 once that taint is removed (another one stays)", 200)

	patchNode(t, api, `{"metadata":{"finalizers":["`+holdFinalizer+`"]}}`)
	t.Cleanup(func() { patchNode(t, api, `{"metadata":{"finalizers":null}}`) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := api.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete node %s: %v", nodeName, err)
	}
	if n, err := api.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil || n.DeletionTimestamp == nil {
		t.Fatalf("node %s after delete: %v (deletionTimestamp %v), want it held by its finalizer", nodeName, err, n.GetDeletionTimestamp())
	}
	expect("/healthz 503 once the Node has a deletion timestamp", 503)
	if !proxy.running() {
		t.Fatalf("svcnet proxy exited: %s", proxy.describe())
	}
}

// setTaints replaces this node's taints.
func setTaints(t *testing.T, api kubernetes.Interface, taints ...corev1.Taint) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
	if err != nil {
		t.Fatal(err)
	}
	patchNode(t, api, string(b))
}

// patchNode applies a JSON merge patch to this node's Node.
func patchNode(t *testing.T, api kubernetes.Interface, patch string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := api.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch node %s with %s: %v", nodeName, patch, err)
	}
}
