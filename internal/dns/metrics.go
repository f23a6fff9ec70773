package dns

import (
	"net/http"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label names of the request metrics.
const (
	LabelType  = "type"  // the question's type: one of monitoredTypes, "other"
	LabelRcode = "rcode" // the answer's rcode as named by RFC 6895 ("NOERROR", "NXDOMAIN", ...)
)

// typeOther is the type label of questions of unmonitored types and of
// queries that could not be parsed.
const typeOther = "other"

// monitoredTypes are the question types counted under their own name (a
// fixed set, so a client cannot grow the label's cardinality).
var monitoredTypes = map[uint16]string{
	dns.TypeA: "A", dns.TypeAAAA: "AAAA", dns.TypeCNAME: "CNAME", dns.TypePTR: "PTR",
	dns.TypeSRV: "SRV", dns.TypeTXT: "TXT", dns.TypeSOA: "SOA", dns.TypeNS: "NS",
	dns.TypeMX: "MX", dns.TypeANY: "ANY", dns.TypeHTTPS: "HTTPS", dns.TypeSVCB: "SVCB",
}

// typeLabel returns the type label of a question type.
func typeLabel(t uint16) string {
	if s, ok := monitoredTypes[t]; ok {
		return s
	}
	return typeOther
}

// rcodeLabel returns the rcode label of an (extended) rcode.
func rcodeLabel(rc int) string {
	if rc == dns.RcodeBadVers {
		return "BADVERS" // RcodeToString names 16 after its TSIG meaning, BADSIG
	}
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "other"
}

// RequestBuckets are the request-latency buckets: 0.25 ms to ~8 s, doubling
// (CoreDNS's dns_request_duration_seconds buckets).
func RequestBuckets() []float64 { return prometheus.ExponentialBuckets(0.00025, 2, 16) }

// ProgrammingBuckets are the programming-latency buckets: 1 ms to ~16 s,
// doubling.
func ProgrammingBuckets() []float64 { return prometheus.ExponentialBuckets(0.001, 2, 15) }

// Metrics is the DNS server's metric set, on its own registry (never the
// global one) with the Go and process collectors. Fields are safe for
// concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	// Requests: svcnet_dns_requests_total{type,rcode}, one per query answered
	// (also malformed ones answered FORMERR, under type "other").
	Requests *prometheus.CounterVec
	// RequestDuration: svcnet_dns_request_duration_seconds, from a parsed
	// query to its answer written (forwarding included).
	RequestDuration prometheus.Histogram
	// ProgrammingDuration: svcnet_dns_programming_duration_seconds, from a
	// change of the model to the first answer served from it. The change's
	// time is when the server was notified of it, or, for a change that
	// arrived while the previous one was being built, the start of that
	// build: an upper bound, never an underestimate.
	ProgrammingDuration prometheus.Histogram
}

// NewMetrics returns a Metrics with every metric registered on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "svcnet", Subsystem: "dns", Name: "requests_total",
			Help: "DNS queries answered, by question type and response code",
		}, []string{LabelType, LabelRcode}),
		RequestDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "svcnet", Subsystem: "dns", Name: "request_duration_seconds",
			Help:    "Time from a DNS query received to its answer written, in seconds",
			Buckets: RequestBuckets(),
		}),
		ProgrammingDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "svcnet", Subsystem: "dns", Name: "programming_duration_seconds",
			Help:    "Time from a change of the cluster model to answers served from it, in seconds",
			Buckets: ProgrammingBuckets(),
		}),
	}
	m.registry.MustRegister(m.Requests, m.RequestDuration, m.ProgrammingDuration,
		collectors.NewGoCollector(),
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
