package controller

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
	"github.com/svcnet/svcnet/internal/model"
)

func testPool(name, mode string, addrs ...string) *pool.IPAddressPool {
	return &pool.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: pool.IPAddressPoolSpec{Mode: mode, Addresses: addrs}}
}

// TestMetricsObserve: used and free addresses per admitted l2 pool (addresses
// excluded as a node's own are not free), Services by state, refused pools by
// reason; a pool that goes away, or is admitted again, loses its series.
func TestMetricsObserve(t *testing.T) {
	m := NewMetrics()
	node4 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node4"}, Status: corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.26.236.199"}}}}
	in := plan.Input{
		Pools: []*pool.IPAddressPool{
			admittedBefore(testPool("lab", "", "172.26.236.180-172.26.236.199")),
			testPool("v6", "l2", "fd00::/120"),
			testPool("nodes", "node-ip"),
			testPool("bad", "l2", "not-an-address"),
			testPool("over", "l2", "172.26.236.190/31"),
		},
		Nodes: []*corev1.Node{node4},
	}
	out := plan.Desired(plan.Config{}, in)
	out.Results = []plan.ServiceResult{
		{Key: model.ServiceKey{Namespace: "a", Name: "x"}, Pool: "lab", Ingress: want("172.26.236.180")},
		// Two Services sharing an IP use one address.
		{Key: model.ServiceKey{Namespace: "a", Name: "y"}, Pool: "lab", Ingress: want("172.26.236.181")},
		{Key: model.ServiceKey{Namespace: "a", Name: "z"}, Pool: "lab", Ingress: want("172.26.236.181")},
		{Key: model.ServiceKey{Namespace: "b", Name: "p"}, Err: alloc.ErrPoolExhausted},
		{Key: model.ServiceKey{Namespace: "b", Name: "released"}},
	}
	m.observe(out)
	for _, c := range []struct {
		pool, state string
		want        float64
	}{
		{"lab", StateUsed, 2}, {"lab", StateFree, 17}, {"v6", StateUsed, 0}, {"v6", StateFree, 256},
	} {
		if got := gauge(t, m, "svcnet_lb_pool_addresses", "pool", c.pool, "state", c.state); got != c.want {
			t.Errorf("pool %s %s = %v, want %v", c.pool, c.state, got, c.want)
		}
	}
	if n := series(t, m, "svcnet_lb_pool_addresses"); n != 4 {
		t.Errorf("%d pool series, want 4 (node-ip and refused pools have none)", n)
	}
	if a, p := gauge(t, m, "svcnet_lb_services", "state", "assigned"), gauge(t, m, "svcnet_lb_services", "state", "pending"); a != 3 || p != 1 {
		t.Errorf("services assigned %v pending %v, want 3 1", a, p)
	}
	if got := gauge(t, m, "svcnet_lb_pool_refused", "pool", "over", "reason", pool.ReasonOverlap); got != 1 {
		t.Errorf("refused over = %v, want 1", got)
	}
	if got := gauge(t, m, "svcnet_lb_pool_refused", "pool", "bad", "reason", pool.ReasonInvalid); got != 1 {
		t.Errorf("refused bad = %v, want 1", got)
	}
	if n := series(t, m, "svcnet_lb_pool_refused"); n != 2 {
		t.Errorf("%d refused series, want 2", n)
	}

	in.Pools = []*pool.IPAddressPool{in.Pools[0], in.Pools[4]}
	in.Nodes = nil
	m.observe(plan.Desired(plan.Config{}, in))
	if n := series(t, m, "svcnet_lb_pool_addresses"); n != 2 {
		t.Errorf("after v6 went away: %d pool series, want 2", n)
	}
	if got := gauge(t, m, "svcnet_lb_pool_addresses", "pool", "lab", "state", StateFree); got != 20 {
		t.Errorf("lab free = %v after its Services and the node went, want 20", got)
	}
	if n := series(t, m, "svcnet_lb_pool_refused"); n != 1 {
		t.Errorf("after bad went away: %d refused series, want 1", n)
	}

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`svcnet_lb_pool_addresses{pool="lab",state="free"} 20`, `svcnet_lb_pool_refused{pool="over",reason="Overlap"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
}

// admittedBefore gives p the status of a pool admitted at its generation.
func admittedBefore(p *pool.IPAddressPool) *pool.IPAddressPool {
	p.Status = &pool.IPAddressPoolStatus{Conditions: []metav1.Condition{{Type: pool.ConditionAccepted,
		Status: metav1.ConditionTrue, Reason: pool.ReasonAccepted, ObservedGeneration: p.Generation}}}
	return p
}

// family gathers m's registry and returns the metrics of family name.
func family(t *testing.T, m *Metrics, name string) []*dto.Metric {
	t.Helper()
	fams, err := m.registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

// series counts the series of family name.
func series(t *testing.T, m *Metrics, name string) int { return len(family(t, m, name)) }

// gauge returns the value of the gauge name with labels (name, value pairs);
// it fails t when there is none.
func gauge(t *testing.T, m *Metrics, name string, labels ...string) float64 {
	t.Helper()
	for _, metric := range family(t, m, name) {
		got := map[string]string{}
		for _, l := range metric.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && got[labels[i]] == labels[i+1]
		}
		if match {
			return metric.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}
