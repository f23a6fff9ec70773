// Package metrics defines the proxy's Prometheus metrics: kube-proxy's own
// (pkg/proxy/metrics, v1.36: same names, types, help texts, labels and
// buckets, so dashboards and alerts written for kube-proxy keep working) and
// svcnet's additions (prefix svcnet_proxy_).
//
// Every Metrics has its own registry (never the global one) holding these
// metrics plus the Go and process collectors; Handler serves it. Vector
// metrics appear in the exposition once a label combination has been used, as
// in kube-proxy. The package knows nothing of the data plane; the proxy wires
// it.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const (
	kubeProxySubsystem = "kubeproxy"
	svcnetNamespace    = "svcnet"
	svcnetSubsystem    = "proxy"

	// alpha is how kube-proxy's component-base marks ALPHA metrics' help.
	alpha = "[ALPHA] "
)

// Label names and values.
const (
	LabelIPFamily      = "ip_family"      // "IPv4" or "IPv6", as kube-proxy's v1.IPFamily
	LabelTrafficPolicy = "traffic_policy" // TrafficPolicyInternal or TrafficPolicyExternal
	LabelCode          = "code"           // HTTP status code, decimal
	LabelReason        = "reason"         // why a Service was skipped or a heartbeat refused (short, fixed vocabulary)

	TrafficPolicyInternal = "internal"
	TrafficPolicyExternal = "external"
)

// SyncLatencyBuckets are kube-proxy's sync-duration buckets: 1ms to ~16s,
// doubling (ExponentialBuckets(0.001, 2, 15)).
func SyncLatencyBuckets() []float64 { return prometheus.ExponentialBuckets(0.001, 2, 15) }

// NetworkProgrammingBuckets are kube-proxy's network-programming buckets:
// component-base's MergeBuckets starts with a 0 bucket, then 0.25s, 0.5s,
// 1s..59s, 60s..115s by 5s, 120s..300s by 30s.
func NetworkProgrammingBuckets() []float64 {
	b := []float64{0}
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	b = append(b, prometheus.LinearBuckets(120, 30, 7)...)
	return b
}

// TransactionOpsBuckets are the buckets of svcnet_proxy_nftables_transaction_ops:
// 1 to 262144 operations, ×4.
func TransactionOpsBuckets() []float64 { return prometheus.ExponentialBuckets(1, 4, 10) }

// Metrics is the proxy's metric set. Fields are safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	// kube-proxy's metrics (the nftables mode set).

	// SyncProxyRulesLatency: kubeproxy_sync_proxy_rules_duration_seconds{ip_family}, every sync.
	SyncProxyRulesLatency *prometheus.HistogramVec
	// SyncFullProxyRulesLatency: kubeproxy_sync_full_proxy_rules_duration_seconds{ip_family}.
	SyncFullProxyRulesLatency *prometheus.HistogramVec
	// SyncPartialProxyRulesLatency: kubeproxy_sync_partial_proxy_rules_duration_seconds{ip_family}.
	SyncPartialProxyRulesLatency *prometheus.HistogramVec
	// NetworkProgrammingLatency: kubeproxy_network_programming_duration_seconds{ip_family},
	// from an EndpointSlice's last-change-trigger-time to the sync that programmed it.
	NetworkProgrammingLatency *prometheus.HistogramVec
	// SyncProxyRulesLastTimestamp: kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family},
	// set after each successful sync.
	SyncProxyRulesLastTimestamp *prometheus.GaugeVec
	// SyncProxyRulesLastQueuedTimestamp: kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family},
	// set when a sync is requested.
	SyncProxyRulesLastQueuedTimestamp *prometheus.GaugeVec
	// EndpointChangesPending: kubeproxy_sync_proxy_rules_endpoint_changes_pending.
	EndpointChangesPending prometheus.Gauge
	// EndpointChangesTotal: kubeproxy_sync_proxy_rules_endpoint_changes_total.
	EndpointChangesTotal prometheus.Counter
	// ServiceChangesPending: kubeproxy_sync_proxy_rules_service_changes_pending.
	ServiceChangesPending prometheus.Gauge
	// ServiceChangesTotal: kubeproxy_sync_proxy_rules_service_changes_total.
	ServiceChangesTotal prometheus.Counter
	// SyncProxyRulesNoLocalEndpointsTotal: kubeproxy_sync_proxy_rules_no_local_endpoints_total
	// {traffic_policy, ip_family}. A gauge despite its name, as in kube-proxy:
	// set after each sync to the number of Services with a Local policy and
	// no local endpoints.
	SyncProxyRulesNoLocalEndpointsTotal *prometheus.GaugeVec
	// NFTablesSyncFailuresTotal: kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family}.
	NFTablesSyncFailuresTotal *prometheus.CounterVec
	// NFTablesCleanupFailuresTotal: kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{ip_family}.
	NFTablesCleanupFailuresTotal *prometheus.CounterVec
	// ProxyHealthzTotal: kubeproxy_proxy_healthz_total{code}.
	ProxyHealthzTotal *prometheus.CounterVec
	// ProxyLivezTotal: kubeproxy_proxy_livez_total{code}.
	ProxyLivezTotal *prometheus.CounterVec
	// ReconcileConntrackFlowsLatency: kubeproxy_conntrack_reconciler_sync_duration_seconds{ip_family}.
	ReconcileConntrackFlowsLatency *prometheus.HistogramVec
	// ReconcileConntrackFlowsDeletedEntriesTotal: kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family}.
	ReconcileConntrackFlowsDeletedEntriesTotal *prometheus.CounterVec

	// svcnet's metrics.

	// Services: svcnet_proxy_services{ip_family}, Services programmed by the last sync.
	Services *prometheus.GaugeVec
	// SkippedServicesTotal: svcnet_proxy_skipped_services_total{reason}, Services
	// left out of a sync because they were invalid or not ours.
	SkippedServicesTotal *prometheus.CounterVec
	// NFTablesTransactionOps: svcnet_proxy_nftables_transaction_ops{ip_family},
	// operations per committed nftables transaction.
	NFTablesTransactionOps *prometheus.HistogramVec
	// ConntrackEntriesDeletedTotal: svcnet_proxy_conntrack_entries_deleted_total{ip_family},
	// stale flows deleted.
	ConntrackEntriesDeletedTotal *prometheus.CounterVec
	// DriftRepairsTotal: svcnet_proxy_drift_repairs_total{ip_family}, periodic
	// checks that found the kernel state differing from what was programmed
	// and reprogrammed it.
	DriftRepairsTotal *prometheus.CounterVec
	// SpeakerHeartbeatsRejectedTotal: svcnet_proxy_speaker_heartbeats_rejected_total{reason},
	// datagrams on the layer-2 speaker's heartbeat port that did not count
	// (reasons: internal/lb/members RejectReasons).
	SpeakerHeartbeatsRejectedTotal *prometheus.CounterVec
	// SpeakerReady: svcnet_proxy_speaker_ready, 1 once the layer-2
	// speaker's warm-up ended and it tells its peers it may own IPs.
	SpeakerReady prometheus.Gauge
	// SpeakerPeersAlive: svcnet_proxy_speaker_peers_alive, the other
	// nodes whose speakers this one counts alive and ready (the ones IPs
	// are shared among, with this node).
	SpeakerPeersAlive prometheus.Gauge
}

// New returns a Metrics with every metric registered on a new registry, along
// with the Go runtime and process collectors.
func New() *Metrics {
	family := []string{LabelIPFamily}
	m := &Metrics{
		registry: prometheus.NewRegistry(),

		SyncProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_duration_seconds",
			Help:      alpha + "SyncProxyRules latency in seconds",
			Buckets:   SyncLatencyBuckets(),
		}, family),
		SyncFullProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_full_proxy_rules_duration_seconds",
			Help:      alpha + "SyncProxyRules latency in seconds for full resyncs",
			Buckets:   SyncLatencyBuckets(),
		}, family),
		SyncPartialProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_partial_proxy_rules_duration_seconds",
			Help:      alpha + "SyncProxyRules latency in seconds for partial resyncs",
			Buckets:   SyncLatencyBuckets(),
		}, family),
		NetworkProgrammingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "network_programming_duration_seconds",
			Help:      alpha + "In Cluster Network Programming Latency in seconds",
			Buckets:   NetworkProgrammingBuckets(),
		}, family),
		SyncProxyRulesLastTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_last_timestamp_seconds",
			Help:      alpha + "The last time proxy rules were successfully synced",
		}, family),
		SyncProxyRulesLastQueuedTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_last_queued_timestamp_seconds",
			Help:      alpha + "The last time a sync of proxy rules was queued",
		}, family),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_endpoint_changes_pending",
			Help:      alpha + "Pending proxy rules Endpoint changes",
		}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_endpoint_changes_total",
			Help:      alpha + "Cumulative proxy rules Endpoint changes",
		}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_service_changes_pending",
			Help:      alpha + "Pending proxy rules Service changes",
		}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_service_changes_total",
			Help:      alpha + "Cumulative proxy rules Service changes",
		}),
		SyncProxyRulesNoLocalEndpointsTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_no_local_endpoints_total",
			Help:      alpha + "Number of services with a Local traffic policy and no endpoints",
		}, []string{LabelTrafficPolicy, LabelIPFamily}),
		NFTablesSyncFailuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_nftables_sync_failures_total",
			Help:      alpha + "Cumulative proxy nftables sync failures",
		}, family),
		NFTablesCleanupFailuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "sync_proxy_rules_nftables_cleanup_failures_total",
			Help:      alpha + "Cumulative proxy nftables cleanup failures",
		}, family),
		ProxyHealthzTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "proxy_healthz_total",
			Help:      alpha + "Cumulative proxy healthz HTTP status",
		}, []string{LabelCode}),
		ProxyLivezTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "proxy_livez_total",
			Help:      alpha + "Cumulative proxy livez HTTP status",
		}, []string{LabelCode}),
		ReconcileConntrackFlowsLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "conntrack_reconciler_sync_duration_seconds",
			Help:      alpha + "ReconcileConntrackFlowsLatency latency in seconds",
			Buckets:   SyncLatencyBuckets(),
		}, family),
		ReconcileConntrackFlowsDeletedEntriesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem,
			Name:      "conntrack_reconciler_deleted_entries_total",
			Help:      alpha + "Cumulative conntrack flows deleted by conntrack reconciler",
		}, family),

		Services: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: svcnetNamespace,
			Subsystem: svcnetSubsystem,
			Name:      "services",
			Help:      "Services programmed by the last successful sync",
		}, family),
		SkippedServicesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: svcnetNamespace,
			Subsystem: svcnetSubsystem,
			Name:      "skipped_services_total",
			Help:      "Cumulative Services left out of a sync, by reason",
		}, []string{LabelReason}),
		NFTablesTransactionOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: svcnetNamespace,
			Subsystem: svcnetSubsystem,
			Name:      "nftables_transaction_ops",
			Help:      "Operations per committed nftables transaction",
			Buckets:   TransactionOpsBuckets(),
		}, family),
		ConntrackEntriesDeletedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: svcnetNamespace,
			Subsystem: svcnetSubsystem,
			Name:      "conntrack_entries_deleted_total",
			Help:      "Cumulative stale conntrack entries deleted",
		}, family),
		DriftRepairsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: svcnetNamespace,
			Subsystem: svcnetSubsystem,
			Name:      "drift_repairs_total",
			Help:      "Cumulative repairs of kernel state found differing from what was programmed",
		}, family),
		SpeakerHeartbeatsRejectedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: svcnetNamespace,
			Subsystem: svcnetSubsystem,
			Name:      "speaker_heartbeats_rejected_total",
			Help:      "Cumulative heartbeat datagrams refused by the layer-2 speaker, by reason",
		}, []string{LabelReason}),
		SpeakerReady: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: svcnetNamespace,
			Subsystem: svcnetSubsystem,
			Name:      "speaker_ready",
			Help:      "1 once the layer-2 speaker's warm-up ended and it may own LoadBalancer IPs, else 0",
		}),
		SpeakerPeersAlive: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: svcnetNamespace,
			Subsystem: svcnetSubsystem,
			Name:      "speaker_peers_alive",
			Help:      "Other nodes whose layer-2 speakers this one counts alive and ready",
		}),
	}

	m.registry.MustRegister(
		m.SyncProxyRulesLatency,
		m.SyncFullProxyRulesLatency,
		m.SyncPartialProxyRulesLatency,
		m.NetworkProgrammingLatency,
		m.SyncProxyRulesLastTimestamp,
		m.SyncProxyRulesLastQueuedTimestamp,
		m.EndpointChangesPending,
		m.EndpointChangesTotal,
		m.ServiceChangesPending,
		m.ServiceChangesTotal,
		m.SyncProxyRulesNoLocalEndpointsTotal,
		m.NFTablesSyncFailuresTotal,
		m.NFTablesCleanupFailuresTotal,
		m.ProxyHealthzTotal,
		m.ProxyLivezTotal,
		m.ReconcileConntrackFlowsLatency,
		m.ReconcileConntrackFlowsDeletedEntriesTotal,
		m.Services,
		m.SkippedServicesTotal,
		m.NFTablesTransactionOps,
		m.ConntrackEntriesDeletedTotal,
		m.DriftRepairsTotal,
		m.SpeakerHeartbeatsRejectedTotal,
		m.SpeakerReady,
		m.SpeakerPeersAlive,
		// As kube-proxy's legacy registry: every Go runtime metric, and the process.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Registry returns m's registry (for tests and for adding collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves m's registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// CountHealthz counts one /healthz answer (healthcheck.ProbeCounter).
func (m *Metrics) CountHealthz(code int) {
	m.ProxyHealthzTotal.WithLabelValues(strconv.Itoa(code)).Inc()
}

// CountLivez counts one /livez answer (healthcheck.ProbeCounter).
func (m *Metrics) CountLivez(code int) {
	m.ProxyLivezTotal.WithLabelValues(strconv.Itoa(code)).Inc()
}

// ObserveNetworkProgramming records, for each EndpointSlice trigger time (the
// endpoints.kubernetes.io/last-change-trigger-time annotation), the time from
// it to now, the end of the sync that programmed the change. Zero times
// (slices without the annotation) are skipped. As in kube-proxy the value is
// not clamped: clock skew against the control plane can make it negative.
func (m *Metrics) ObserveNetworkProgramming(family string, now time.Time, triggers ...time.Time) {
	h := m.NetworkProgrammingLatency.WithLabelValues(family)
	for _, t := range triggers {
		if t.IsZero() {
			continue
		}
		h.Observe(now.Sub(t).Seconds())
	}
}
