package metrics

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	dto "github.com/prometheus/client_model/go"
)

// touchAll uses every metric once, with the label values the proxy uses.
func touchAll(m *Metrics) {
	for _, f := range []string{"IPv4", "IPv6"} {
		m.SyncProxyRulesLatency.WithLabelValues(f).Observe(0.01)
		m.SyncFullProxyRulesLatency.WithLabelValues(f).Observe(0.01)
		m.SyncPartialProxyRulesLatency.WithLabelValues(f).Observe(0.01)
		m.NetworkProgrammingLatency.WithLabelValues(f).Observe(1)
		m.SyncProxyRulesLastTimestamp.WithLabelValues(f).SetToCurrentTime()
		m.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(f).SetToCurrentTime()
		m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(TrafficPolicyInternal, f).Set(1)
		m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(TrafficPolicyExternal, f).Set(2)
		m.NFTablesSyncFailuresTotal.WithLabelValues(f).Inc()
		m.NFTablesCleanupFailuresTotal.WithLabelValues(f).Inc()
		m.ReconcileConntrackFlowsLatency.WithLabelValues(f).Observe(0.01)
		m.ReconcileConntrackFlowsDeletedEntriesTotal.WithLabelValues(f).Add(3)
		m.Services.WithLabelValues(f).Set(10)
		m.NFTablesTransactionOps.WithLabelValues(f).Observe(100)
		m.ConntrackEntriesDeletedTotal.WithLabelValues(f).Add(2)
		m.DriftRepairsTotal.WithLabelValues(f).Inc()
	}
	m.EndpointChangesPending.Set(1)
	m.EndpointChangesTotal.Inc()
	m.ServiceChangesPending.Set(1)
	m.ServiceChangesTotal.Inc()
	m.CountHealthz(200)
	m.CountHealthz(503)
	m.CountLivez(200)
	m.SkippedServicesTotal.WithLabelValues("invalid").Inc()
	m.SpeakerHeartbeatsRejectedTotal.WithLabelValues("bad-signature").Inc()
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, body)
	}
	return string(body)
}

var fam = []string{`ip_family="IPv4"`, `ip_family="IPv6"`}

// TestExposition scrapes the handler and checks every metric's HELP and TYPE
// lines (kube-proxy's texts, with component-base's "[ALPHA] " mark) and a
// sample line for each label set used.
func TestExposition(t *testing.T) {
	m := New()
	touchAll(m)
	text := scrape(t, m.Handler())

	for _, tc := range []struct {
		name, typ, help string
		labelSets       []string // rendered label sets expected in samples; "" for none
	}{
		{"kubeproxy_sync_proxy_rules_duration_seconds", "histogram", "[ALPHA] SyncProxyRules latency in seconds", fam},
		{"kubeproxy_sync_full_proxy_rules_duration_seconds", "histogram", "[ALPHA] SyncProxyRules latency in seconds for full resyncs", fam},
		{"kubeproxy_sync_partial_proxy_rules_duration_seconds", "histogram", "[ALPHA] SyncProxyRules latency in seconds for partial resyncs", fam},
		{"kubeproxy_network_programming_duration_seconds", "histogram", "[ALPHA] In Cluster Network Programming Latency in seconds", fam},
		{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", "gauge", "[ALPHA] The last time proxy rules were successfully synced", fam},
		{"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", "gauge", "[ALPHA] The last time a sync of proxy rules was queued", fam},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_pending", "gauge", "[ALPHA] Pending proxy rules Endpoint changes", []string{""}},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_total", "counter", "[ALPHA] Cumulative proxy rules Endpoint changes", []string{""}},
		{"kubeproxy_sync_proxy_rules_service_changes_pending", "gauge", "[ALPHA] Pending proxy rules Service changes", []string{""}},
		{"kubeproxy_sync_proxy_rules_service_changes_total", "counter", "[ALPHA] Cumulative proxy rules Service changes", []string{""}},
		{"kubeproxy_sync_proxy_rules_no_local_endpoints_total", "gauge", "[ALPHA] Number of services with a Local traffic policy and no endpoints", []string{
			`ip_family="IPv4",traffic_policy="external"`, `ip_family="IPv4",traffic_policy="internal"`,
			`ip_family="IPv6",traffic_policy="external"`, `ip_family="IPv6",traffic_policy="internal"`,
		}},
		{"kubeproxy_sync_proxy_rules_nftables_sync_failures_total", "counter", "[ALPHA] Cumulative proxy nftables sync failures", fam},
		{"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", "counter", "[ALPHA] Cumulative proxy nftables cleanup failures", fam},
		{"kubeproxy_proxy_healthz_total", "counter", "[ALPHA] Cumulative proxy healthz HTTP status", []string{`code="200"`, `code="503"`}},
		{"kubeproxy_proxy_livez_total", "counter", "[ALPHA] Cumulative proxy livez HTTP status", []string{`code="200"`}},
		{"kubeproxy_conntrack_reconciler_sync_duration_seconds", "histogram", "[ALPHA] ReconcileConntrackFlowsLatency latency in seconds", fam},
		{"kubeproxy_conntrack_reconciler_deleted_entries_total", "counter", "[ALPHA] Cumulative conntrack flows deleted by conntrack reconciler", fam},
		{"svcnet_proxy_services", "gauge", "Services programmed by the last successful sync", fam},
		{"svcnet_proxy_skipped_services_total", "counter", "Cumulative Services left out of a sync, by reason", []string{`reason="invalid"`}},
		{"svcnet_proxy_nftables_transaction_ops", "histogram", "Operations per committed nftables transaction", fam},
		{"svcnet_proxy_conntrack_entries_deleted_total", "counter", "Cumulative stale conntrack entries deleted", fam},
		{"svcnet_proxy_drift_repairs_total", "counter", "Cumulative repairs of kernel state found differing from what was programmed", fam},
		{"svcnet_proxy_speaker_heartbeats_rejected_total", "counter", "Cumulative heartbeat datagrams refused by the layer-2 speaker, by reason", []string{`reason="bad-signature"`}},
		{"svcnet_proxy_speaker_ready", "gauge", "1 once the layer-2 speaker's warm-up ended and it may own LoadBalancer IPs, else 0", []string{""}},
		{"svcnet_proxy_speaker_peers_alive", "gauge", "Other nodes whose layer-2 speakers this one counts alive and ready", []string{""}},
	} {
		for _, line := range []string{
			"# HELP " + tc.name + " " + tc.help + "\n",
			"# TYPE " + tc.name + " " + tc.typ + "\n",
		} {
			if !strings.Contains(text, line) {
				t.Errorf("exposition lacks %q", line)
			}
		}
		for _, ls := range tc.labelSets {
			var samples []string
			switch {
			case tc.typ == "histogram":
				samples = []string{
					tc.name + "_bucket{" + ls + `,le="+Inf"} `,
					tc.name + "_sum{" + ls + "} ",
					tc.name + "_count{" + ls + "} ",
				}
			case ls == "":
				samples = []string{tc.name + " "}
			default:
				samples = []string{tc.name + "{" + ls + "} "}
			}
			for _, s := range samples {
				if !strings.Contains(text, "\n"+s) {
					t.Errorf("exposition lacks a sample %q", s)
				}
			}
		}
	}
	// Go runtime and process collectors.
	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "go_sched_goroutines_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if !strings.Contains(text, "# TYPE "+name+" ") {
			t.Errorf("exposition lacks %s", name)
		}
	}
}

// TestBuckets checks each histogram's bucket bounds against kube-proxy's,
// written out here independently of the package's helpers.
func TestBuckets(t *testing.T) {
	m := New()
	touchAll(m)
	sync := []float64{0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384}
	netprog := []float64{0, 0.25, 0.5}
	for s := 1.0; s <= 59; s++ {
		netprog = append(netprog, s)
	}
	for s := 60.0; s <= 115; s += 5 {
		netprog = append(netprog, s)
	}
	for s := 120.0; s <= 300; s += 30 {
		netprog = append(netprog, s)
	}
	if len(netprog) != 81 {
		t.Fatalf("test bug: %d network programming buckets, want 81", len(netprog))
	}
	want := map[string][]float64{
		"kubeproxy_sync_proxy_rules_duration_seconds":          sync,
		"kubeproxy_sync_full_proxy_rules_duration_seconds":     sync,
		"kubeproxy_sync_partial_proxy_rules_duration_seconds":  sync,
		"kubeproxy_conntrack_reconciler_sync_duration_seconds": sync,
		"kubeproxy_network_programming_duration_seconds":       netprog,
		"svcnet_proxy_nftables_transaction_ops":                {1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144},
	}

	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_HISTOGRAM || !strings.HasPrefix(mf.GetName(), "kubeproxy_") && !strings.HasPrefix(mf.GetName(), "svcnet_") {
			continue
		}
		for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			got[mf.GetName()] = append(got[mf.GetName()], b.GetUpperBound())
		}
	}
	approx := cmpopts.EquateApprox(0, 1e-9)
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("histogram buckets (-want +got):\n%s", diff)
	}
}

func TestObserveNetworkProgramming(t *testing.T) {
	m := New()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	m.ObserveNetworkProgramming("IPv4", now, now.Add(-2*time.Second), time.Time{}, now.Add(-500*time.Millisecond))

	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kubeproxy_network_programming_duration_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-2.5) > 1e-9 {
			t.Errorf("count %d sum %v, want 2 observations summing to 2.5s (zero trigger skipped)", h.GetSampleCount(), h.GetSampleSum())
		}
		return
	}
	t.Fatalf("network programming histogram not gathered")
}

// TestRegistriesIndependent: each Metrics has its own registry, so two can
// coexist (tests, or two proxies in one process) and the global one is untouched.
func TestRegistriesIndependent(t *testing.T) {
	a, b := New(), New()
	a.ServiceChangesTotal.Add(5)
	if text := scrape(t, b.Handler()); strings.Contains(text, "kubeproxy_sync_proxy_rules_service_changes_total 5") {
		t.Errorf("a's counter visible through b's handler")
	}
	if text := scrape(t, a.Handler()); !strings.Contains(text, "\nkubeproxy_sync_proxy_rules_service_changes_total 5\n") {
		t.Errorf("a's counter missing from a's handler")
	}
}
