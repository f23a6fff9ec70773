package controller

import (
	"errors"
	"math/big"
	"net/http"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// Pool usage states, the label state of svcnet_lb_pool_addresses.
const (
	StateUsed = "used"
	StateFree = "free"
)

// Metrics is the controller's Prometheus metric set, in its own registry
// (never the global one) with the Go and process collectors. Safe for
// concurrent use.
type Metrics struct {
	registry *prometheus.Registry
	// PoolAddresses is svcnet_lb_pool_addresses{pool,state}: per valid l2-mode
	// pool, its addresses in use by a Service (planned) and free. Pools that are
	// gone or invalid have no series.
	PoolAddresses *prometheus.GaugeVec
	// Services is svcnet_lb_services{state}: Services this controller owns,
	// "assigned" or "pending".
	Services *prometheus.GaugeVec

	mu    sync.Mutex
	pools map[string]bool // pools with series
}

// NewMetrics returns a metric set with its own registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		PoolAddresses: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "svcnet", Subsystem: "lb", Name: "pool_addresses",
			Help: "Addresses of each IPAddressPool, by state (used: assigned to a Service; free).",
		}, []string{"pool", "state"}),
		Services: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "svcnet", Subsystem: "lb", Name: "services",
			Help: "LoadBalancer Services of this controller's class, by state (assigned or pending).",
		}, []string{"state"}),
		pools: map[string]bool{},
	}
	m.registry.MustRegister(m.PoolAddresses, m.Services,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// observe sets the gauges from one recompute's input and plan.
func (m *Metrics) observe(in plan.Input, out plan.Output) {
	used := map[string]map[string]bool{}
	assigned, pending := 0, 0
	for _, r := range out.Results {
		switch {
		case r.Err != nil:
			pending++
		case len(r.Ingress) > 0:
			assigned++
		}
		if r.Pool == "" {
			continue
		}
		if used[r.Pool] == nil {
			used[r.Pool] = map[string]bool{}
		}
		for _, ip := range ingressIPs(r.Ingress) {
			used[r.Pool][ip] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Services.WithLabelValues("assigned").Set(float64(assigned))
	m.Services.WithLabelValues("pending").Set(float64(pending))
	bad := map[string]bool{}
	for _, err := range out.PoolErrors {
		var pe *pool.Error
		if errors.As(err, &pe) {
			bad[pe.Pool] = true
		}
	}
	now := map[string]bool{}
	for _, p := range in.Pools {
		if bad[p.Name] {
			continue
		}
		ap, err := pool.Parse(p)
		if err != nil || ap.Mode != alloc.ModeL2 {
			continue
		}
		size := poolSize(ap.Ranges)
		n := float64(len(used[p.Name]))
		m.PoolAddresses.WithLabelValues(p.Name, StateUsed).Set(n)
		m.PoolAddresses.WithLabelValues(p.Name, StateFree).Set(max(size-n, 0))
		now[p.Name] = true
	}
	for name := range m.pools {
		if !now[name] {
			m.PoolAddresses.DeleteLabelValues(name, StateUsed)
			m.PoolAddresses.DeleteLabelValues(name, StateFree)
		}
	}
	m.pools = now
}

// poolSize returns how many addresses ranges hold (as a float: IPv6 ranges
// may exceed any integer type).
func poolSize(ranges []alloc.Range) float64 {
	total := new(big.Int)
	for _, r := range ranges {
		n := new(big.Int).Sub(addrInt(r.Last), addrInt(r.First))
		total.Add(total, n.Add(n, big.NewInt(1)))
	}
	f, _ := new(big.Float).SetInt(total).Float64()
	return f
}

func addrInt(a netip.Addr) *big.Int {
	b := a.AsSlice()
	return new(big.Int).SetBytes(b)
}
