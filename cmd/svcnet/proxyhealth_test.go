package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
	"github.com/svcnet/svcnet/internal/proxy/metrics"
)

// TestProxyHealthFollowsNode walks this node's Node through the states
// kube-proxy's /healthz distinguishes, over the store svcnet proxy reads:
// /healthz is 503 while the Node is unknown, tainted
// ToBeDeletedByClusterAutoscaler or being deleted; /livez stays 200.
func TestProxyHealthFollowsNode(t *testing.T) {
	store := model.NewStore()
	cfg := proxy.Config{NodeName: "node1"}.WithDefaults()
	h := proxyHealthServer("127.0.0.1:0", cfg, store, metrics.New(), klog.Background()).Handler()
	setNode := func(n *model.Node) {
		store.Update(func(tx *model.Txn) {
			if n == nil {
				tx.DeleteNode("node1")
			} else {
				tx.SetNode(n)
			}
		})
	}
	for _, step := range []struct {
		name    string
		node    *model.Node
		healthz int
	}{
		{"no Node yet", nil, 503},
		{"plain Node", &model.Node{Name: "node1", TaintKeys: []string{"node.kubernetes.io/unschedulable"}}, 200},
		{"tainted for deletion", &model.Node{Name: "node1", TaintKeys: []string{healthcheck.ToBeDeletedTaint}}, 503},
		{"taint removed", &model.Node{Name: "node1"}, 200},
		{"being deleted", &model.Node{Name: "node1", Terminating: true}, 503},
		{"deleted", nil, 503},
	} {
		setNode(step.node)
		for path, want := range map[string]int{"/healthz": step.healthz, "/livez": 200} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != want {
				t.Errorf("%s: GET %s = %d %s, want %d", step.name, path, rec.Code, rec.Body, want)
			}
			eligible := `"nodeEligible":` + map[bool]string{true: "true", false: "false"}[step.healthz == 200]
			if path == "/healthz" && !strings.Contains(rec.Body.String(), eligible) {
				t.Errorf("%s: /healthz body %s, want %s", step.name, rec.Body, eligible)
			}
		}
	}
}
