package dns

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
)

// counter returns svcnet_dns_requests_total{type,rcode}.
func counter(t *testing.T, m *Metrics, typ, rcode string) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Requests.WithLabelValues(typ, rcode).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

func TestMetricsCountRequests(t *testing.T) {
	s, addr := start(t, ServerConfig{}, syncedStore())
	queries := []struct {
		name  string
		qtype uint16
	}{
		{"my-nginx.default.svc.cluster.local.", dns.TypeA},
		{"my-nginx.default.svc.cluster.local.", dns.TypeA},
		{"my-nginx.default.svc.cluster.local.", dns.TypeAAAA}, // NODATA
		{"nope.default.svc.cluster.local.", dns.TypeA},        // NXDOMAIN
		{"_http._tcp.my-nginx.default.svc.cluster.local.", dns.TypeSRV},
		{"my-nginx.default.svc.cluster.local.", dns.TypeNAPTR}, // other
		{"example.com.", dns.TypeA},                            // REFUSED
	}
	for _, q := range queries {
		ask(t, "udp", addr, question(q.name, q.qtype))
	}
	m := s.Metrics()
	// The server counts after writing the answer: wait for the last query.
	waitFor(2*time.Second, func() bool { return histogramCount(t, m.RequestDuration) >= uint64(len(queries)) })
	for _, want := range []struct {
		typ, rcode string
		n          float64
	}{
		{"A", "NOERROR", 2}, {"AAAA", "NOERROR", 1}, {"A", "NXDOMAIN", 1}, {"SRV", "NOERROR", 1},
		{typeOther, "NOERROR", 1}, {"A", "REFUSED", 1},
	} {
		if got := counter(t, m, want.typ, want.rcode); got != want.n {
			t.Errorf("requests_total{type=%s,rcode=%s} = %v, want %v", want.typ, want.rcode, got, want.n)
		}
	}
	if got := histogramCount(t, m.RequestDuration); got != uint64(len(queries)) {
		t.Errorf("request_duration_seconds count %d, want %d", got, len(queries))
	}
	if got := histogramCount(t, m.ProgrammingDuration); got < 1 {
		t.Errorf("programming_duration_seconds count %d, want at least the first sync", got)
	}

	code, body := get(t, NewHTTPHandler(m, s.Ready), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`svcnet_dns_requests_total{rcode="NOERROR",type="A"} 2`,
		"svcnet_dns_request_duration_seconds_bucket",
		"svcnet_dns_programming_duration_seconds_count",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestLabels(t *testing.T) {
	for rc, want := range map[int]string{dns.RcodeSuccess: "NOERROR", dns.RcodeNameError: "NXDOMAIN", dns.RcodeBadVers: "BADVERS", 4000: "other"} {
		if got := rcodeLabel(rc); got != want {
			t.Errorf("rcodeLabel(%d) = %q, want %q", rc, got, want)
		}
	}
	for qt, want := range map[uint16]string{dns.TypeA: "A", dns.TypePTR: "PTR", dns.TypeNAPTR: typeOther, 65280: typeOther} {
		if got := typeLabel(qt); got != want {
			t.Errorf("typeLabel(%d) = %q, want %q", qt, got, want)
		}
	}
}
