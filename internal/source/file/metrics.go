package file

import "github.com/prometheus/client_golang/prometheus"

// Metrics count how a long-running Source took the changes of its
// manifests: each whole read (every document decoded again, unless cached,
// and the control plane's result reconciled with the store), and each
// record of a publication's journal (only the objects that changed). An
// agent following a publication reads it whole once at start and when the
// journal does not continue what it holds; a count of whole reads that
// grows with every change tells that it is not following.
type Metrics struct {
	// Loads: svcnet_file_source_loads_total, whole reads of the manifests
	// that fed the store.
	Loads prometheus.Counter
	// JournalRecords: svcnet_file_source_journal_records_total, records of
	// a publication's journal written to the store.
	JournalRecords prometheus.Counter
}

// NewMetrics returns unregistered Metrics (see Collectors).
func NewMetrics() *Metrics {
	return &Metrics{
		Loads: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "svcnet", Subsystem: "file_source", Name: "loads_total",
			Help: "Whole reads of the manifests or publication that fed the store",
		}),
		JournalRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "svcnet", Subsystem: "file_source", Name: "journal_records_total",
			Help: "Records of the publication's journal written to the store",
		}),
	}
}

// Collectors returns m's metrics, for a registry.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Loads, m.JournalRecords}
}

// loaded counts a whole read; m may be nil.
func (m *Metrics) loaded() {
	if m != nil {
		m.Loads.Inc()
	}
}

// followed counts n journal records; m may be nil.
func (m *Metrics) followed(n int) {
	if m != nil {
		m.JournalRecords.Add(float64(n))
	}
}
