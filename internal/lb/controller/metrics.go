package controller

import (
	"math/big"
	"net/http"
	"net/netip"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svcnet/svcnet/internal/lb/alloc"
	"github.com/svcnet/svcnet/internal/lb/plan"
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
	// PoolRefused is svcnet_lb_pool_refused{pool,reason}: 1 for each pool left
	// out, with its ConditionAccepted reason (Overlap, ReservedAddresses,
	// Invalid). Admitted pools have no series.
	PoolRefused *prometheus.GaugeVec

	mu      sync.Mutex
	pools   map[string]bool     // pools with PoolAddresses series
	refused map[string][]string // PoolRefused label values set
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
		PoolRefused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "svcnet", Subsystem: "lb", Name: "pool_refused",
			Help: "1 for each IPAddressPool left out, by reason (Overlap: it shares addresses with an older pool; ReservedAddresses: it holds a node's address, a pod CIDR or a service CIDR; Invalid).",
		}, []string{"pool", "reason"}),
		pools:   map[string]bool{},
		refused: map[string][]string{},
	}
	m.registry.MustRegister(m.PoolAddresses, m.Services, m.PoolRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// observe sets the gauges from one recompute's plan.
func (m *Metrics) observe(out plan.Output) {
	used := map[string]map[netip.Addr]bool{}
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
			used[r.Pool] = map[netip.Addr]bool{}
		}
		for _, ip := range ingressIPs(r.Ingress) {
			if a, err := netip.ParseAddr(ip); err == nil {
				used[r.Pool][a.Unmap()] = true
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Services.WithLabelValues("assigned").Set(float64(assigned))
	m.Services.WithLabelValues("pending").Set(float64(pending))
	now := map[string]bool{}
	refused := map[string][]string{}
	for _, r := range out.Pools {
		if r.Err != nil {
			refused[r.Name] = []string{r.Name, acceptedReason(r)}
			m.PoolRefused.WithLabelValues(refused[r.Name]...).Set(1)
			continue
		}
		if !r.Admitted || r.Pool.Mode != alloc.ModeL2 {
			continue
		}
		n, free := poolUsage(r.Pool, used[r.Name])
		m.PoolAddresses.WithLabelValues(r.Name, StateUsed).Set(n)
		m.PoolAddresses.WithLabelValues(r.Name, StateFree).Set(free)
		now[r.Name] = true
	}
	for name := range m.pools {
		if !now[name] {
			m.PoolAddresses.DeleteLabelValues(name, StateUsed)
			m.PoolAddresses.DeleteLabelValues(name, StateFree)
		}
	}
	for name, lv := range m.refused {
		if !slices.Equal(refused[name], lv) {
			m.PoolRefused.DeleteLabelValues(lv...)
		}
	}
	m.pools, m.refused = now, refused
}

// poolUsage returns how many addresses of p are used (in used, within its
// ranges) and how many are free: neither used nor Excluded.
func poolUsage(p alloc.Pool, used map[netip.Addr]bool) (n, free float64) {
	var ex []alloc.Range
	for _, e := range p.Excluded {
		ex = append(ex, e.Range)
	}
	outside := 0.0
	for ip := range used {
		if !slices.ContainsFunc(p.Ranges, func(r alloc.Range) bool { return r.Contains(ip) }) {
			continue
		}
		n++
		if !slices.ContainsFunc(ex, func(r alloc.Range) bool { return r.Contains(ip) }) {
			outside++
		}
	}
	return n, max(poolSize(p.Ranges)-poolSize(merge(ex))-outside, 0)
}

// merge returns the union of ranges as disjoint ranges.
func merge(ranges []alloc.Range) []alloc.Range {
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b alloc.Range) int { return a.First.Compare(b.First) })
	var out []alloc.Range
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && out[k].First.Is4() == r.First.Is4() && (out[k].Overlaps(r) || out[k].Last.Next() == r.First) {
			if r.Last.Compare(out[k].Last) > 0 {
				out[k].Last = r.Last
			}
			continue
		}
		out = append(out, r)
	}
	return out
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
