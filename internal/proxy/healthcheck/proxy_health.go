package healthcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/httpserve"
	"github.com/svcnet/svcnet/internal/model"
)

const (
	// DefaultHealthzBindAddress is kube-proxy's --healthz-bind-address default.
	DefaultHealthzBindAddress = "0.0.0.0:10256"

	// ToBeDeletedTaint is the taint the Cluster Autoscaler puts on a node before
	// deleting it; a node carrying it is not eligible for load-balanced traffic.
	ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
)

// HealthTimeout is the health timeout kube-proxy derives from --sync-period:
// an update queued for longer than this without a completed sync makes the
// proxy unhealthy.
func HealthTimeout(syncPeriod time.Duration) time.Duration { return 2 * syncPeriod }

// ProxierHealth is the health of the proxier of one IP family.
type ProxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// ProxyHealth is the proxy's health as reported by /healthz and /livez. Its
// JSON encoding is kube-proxy v1.36's response body, field for field.
type ProxyHealth struct {
	// LastUpdated is the latest Updated time over all families. The HTTP
	// handlers replace it with the current time when healthy (kube-proxy keeps
	// that for backward compatibility).
	LastUpdated time.Time `json:"lastUpdated"`
	CurrentTime time.Time `json:"currentTime"`
	// NodeEligible is set only in /healthz responses.
	NodeEligible *bool `json:"nodeEligible,omitempty"`
	// Healthy is true when every family's proxier is healthy.
	Healthy bool `json:"healthy"`
	// Status is the health of each family that has called Updated at least once.
	Status map[v1.IPFamily]ProxierHealth `json:"status,omitempty"`
}

// ProbeCounter counts health probe responses by HTTP status code
// (kubeproxy_proxy_healthz_total and kubeproxy_proxy_livez_total).
type ProbeCounter interface {
	CountHealthz(code int)
	CountLivez(code int)
}

// ProxyHealthConfig configures a ProxyHealthServer. Zero values take the
// documented defaults.
type ProxyHealthConfig struct {
	// Addr is the host:port to serve on; "" means DefaultHealthzBindAddress.
	Addr string
	// HealthTimeout is how long a queued update may stay unsynced before the
	// proxy is unhealthy; use HealthTimeout(syncPeriod). Zero means 60s (the
	// value for kube-proxy's default 30s sync period).
	HealthTimeout time.Duration
	// NodeEligible reports whether this node may receive load-balanced traffic;
	// it only affects /healthz. Use NodeEligible(node) over the proxy's current
	// Node object to match kube-proxy, which reports an unknown node (nil) as not
	// eligible. Nil means the node is always eligible.
	NodeEligible func() bool
	// Probes counts probe responses; nil counts nothing.
	Probes ProbeCounter
	// Listener opens the socket; nil means StdListener.
	Listener Listener
	// Logger receives the server's logs; the zero value means klog.Background().
	Logger klog.Logger
}

// ProxyHealthServer tracks, per IP family, when the proxier last synced and
// since when an update has been waiting, and serves /healthz and /livez from
// that. All methods are safe for concurrent use.
type ProxyHealthServer struct {
	addr          string
	healthTimeout time.Duration
	nodeEligible  func() bool
	probes        ProbeCounter
	listener      Listener
	log           klog.Logger

	mu                  sync.RWMutex
	lastUpdated         map[v1.IPFamily]time.Time
	oldestPendingQueued map[v1.IPFamily]time.Time
}

// NewProxyHealthServer returns a server for cfg. It opens nothing: call Run.
func NewProxyHealthServer(cfg ProxyHealthConfig) *ProxyHealthServer {
	hs := &ProxyHealthServer{
		addr:                cfg.Addr,
		healthTimeout:       cfg.HealthTimeout,
		nodeEligible:        cfg.NodeEligible,
		probes:              cfg.Probes,
		listener:            cfg.Listener,
		log:                 cfg.Logger,
		lastUpdated:         map[v1.IPFamily]time.Time{},
		oldestPendingQueued: map[v1.IPFamily]time.Time{},
	}
	if hs.addr == "" {
		hs.addr = DefaultHealthzBindAddress
	}
	if hs.healthTimeout <= 0 {
		hs.healthTimeout = HealthTimeout(30 * time.Second)
	}
	if hs.listener == nil {
		hs.listener = StdListener{}
	}
	if hs.log.GetSink() == nil {
		hs.log = klog.Background()
	}
	return hs
}

// Updated records that the proxier of family has just synced successfully: any
// pending update of that family is done.
func (hs *ProxyHealthServer) Updated(family v1.IPFamily) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.oldestPendingQueued, family)
	hs.lastUpdated[family] = time.Now()
}

// QueuedUpdate records that the proxier of family has received a change it has
// not yet programmed. Only the oldest pending time counts: if Updated does not
// follow within the health timeout, the proxy becomes unhealthy.
func (hs *ProxyHealthServer) QueuedUpdate(family v1.IPFamily) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if _, set := hs.oldestPendingQueued[family]; !set {
		hs.oldestPendingQueued[family] = time.Now()
	}
}

// Health returns the proxy's health, ignoring the node's eligibility. A family
// is healthy until it has called Updated once (starting up), while nothing is
// queued, and while its oldest queued update is younger than the timeout.
func (hs *ProxyHealthServer) Health() ProxyHealth {
	health := ProxyHealth{
		Healthy: true,
		Status:  make(map[v1.IPFamily]ProxierHealth),
	}
	hs.mu.RLock()
	defer hs.mu.RUnlock()

	now := time.Now()
	health.CurrentTime = now
	for family, updated := range hs.lastUpdated {
		if updated.After(health.LastUpdated) {
			health.LastUpdated = updated
		}
		healthy := true
		if queued, set := hs.oldestPendingQueued[family]; set && now.Sub(queued) >= hs.healthTimeout {
			healthy = false
			health.Healthy = false
		}
		health.Status[family] = ProxierHealth{LastUpdated: updated, Healthy: healthy}
	}
	return health
}

// NodeEligible reports the node's eligibility through the configured function
// (true when none is configured).
func (hs *ProxyHealthServer) NodeEligible() bool {
	if hs.nodeEligible == nil {
		return true
	}
	return hs.nodeEligible()
}

// NodeEligible reports whether node may receive load-balanced traffic, as
// kube-proxy decides it for /healthz: the node is known (nil, not yet or no
// longer seen, is not eligible), has no deletion timestamp, and is not tainted
// ToBeDeletedByClusterAutoscaler. External load balancers that probe /healthz
// thus drain a node before it goes away.
func NodeEligible(node *model.Node) bool {
	return node != nil && !node.Terminating && !node.HasTaint(ToBeDeletedTaint)
}

// Handler returns the /healthz and /livez handlers (what Run serves).
func (hs *ProxyHealthServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", hs.serveHealthz)
	mux.HandleFunc("/livez", hs.serveLivez)
	return mux
}

// Run listens on the configured address and serves until ctx ends; it then
// closes the server and returns nil. It returns an error if the address cannot
// be bound or the server fails; the caller decides whether to retry.
func (hs *ProxyHealthServer) Run(ctx context.Context) error {
	l, err := hs.listener.Listen(ctx, "tcp", hs.addr)
	if err != nil {
		return fmt.Errorf("start proxy healthz on %s: %w", hs.addr, err)
	}
	hs.log.V(3).Info("Starting healthz HTTP server", "address", l.Addr().String())
	if err := httpserve.Until(ctx, httpserve.New(hs.Handler()), l); err != nil {
		return fmt.Errorf("proxy healthz on %s: %w", hs.addr, err)
	}
	return nil
}

func (hs *ProxyHealthServer) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	health := hs.Health()
	eligible := hs.NodeEligible()
	// Only /healthz reports eligibility; /livez ignores it.
	health.NodeEligible = &eligible
	code := hs.writeHealth(w, health, health.Healthy && eligible)
	if hs.probes != nil {
		hs.probes.CountHealthz(code)
	}
}

func (hs *ProxyHealthServer) serveLivez(w http.ResponseWriter, _ *http.Request) {
	health := hs.Health()
	code := hs.writeHealth(w, health, health.Healthy)
	if hs.probes != nil {
		hs.probes.CountLivez(code)
	}
}

// writeHealth writes kube-proxy's response: 200 or 503, and the JSON body with
// lastUpdated set to now when healthy (kube-proxy's backward-compatible
// meaning: "recent" when healthy).
func (hs *ProxyHealthServer) writeHealth(w http.ResponseWriter, health ProxyHealth, healthy bool) int {
	code := http.StatusServiceUnavailable
	if healthy {
		code = http.StatusOK
		health.LastUpdated = time.Now()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	body, _ := json.Marshal(health) // cannot fail: plain struct of times, bools and strings
	_, _ = w.Write(body)
	return code
}
