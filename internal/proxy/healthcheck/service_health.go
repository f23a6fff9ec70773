package healthcheck

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/httpserve"
)

// HealthChecker reports the proxy's health; *ProxyHealthServer implements it.
type HealthChecker interface {
	Health() ProxyHealth
}

// ServiceHealthConfig configures a ServiceHealthServer.
type ServiceHealthConfig struct {
	// NodeName names this node in errors and logs.
	NodeName string
	// Family is the IP family this server answers for (kube-proxy runs one per
	// family). IPv4 listens with "tcp4", IPv6 with "tcp6"; "" lets the system
	// choose ("tcp").
	Family v1.IPFamily
	// Addresses are the node addresses to listen on (the resolved
	// --nodeport-addresses of Family). Empty means all addresses: 0.0.0.0, or
	// [::] for IPv6.
	Addresses []netip.Addr
	// Health is the proxy's health; nil means always healthy.
	Health HealthChecker
	// Listener opens the sockets; nil means StdListener.
	Listener Listener
	// Logger receives the server's logs; the zero value means klog.Background().
	Logger klog.Logger
}

// ListenError is a Service whose health check port could not be opened. The
// Service is retried at the next SyncServices (or Run).
type ListenError struct {
	Service types.NamespacedName
	Port    uint16
	Err     error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("healthcheck for service %s port %d: %v", e.Service, e.Port, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// ServiceHealthServer serves one HTTP health check per Service with a
// healthCheckNodePort: 200 when the Service has local endpoints and the proxy
// is healthy, else 503 (telling load balancers not to use this node).
//
// SyncServices and SyncEndpoints record the wanted state at any time; sockets
// are open only while Run is running. All methods are safe for concurrent use.
type ServiceHealthServer struct {
	nodeName string
	network  string
	hosts    []string
	health   HealthChecker
	listener Listener
	log      klog.Logger

	mu       sync.RWMutex
	running  bool // Run is serving: instances should be open
	stopped  bool // Run has returned: it cannot run again
	services map[types.NamespacedName]*hcInstance
	serving  sync.WaitGroup // one per serving goroutine
}

// hcInstance is one Service's health check: its port, its local endpoint
// count, and its HTTP servers and their sockets (one per address; nil while
// not open).
type hcInstance struct {
	port      uint16
	endpoints int
	servers   []*http.Server
	listeners []net.Listener
}

// NewServiceHealthServer returns a server for cfg. It opens nothing: call Run.
func NewServiceHealthServer(cfg ServiceHealthConfig) *ServiceHealthServer {
	s := &ServiceHealthServer{
		nodeName: cfg.NodeName,
		health:   cfg.Health,
		listener: cfg.Listener,
		log:      cfg.Logger,
		services: map[types.NamespacedName]*hcInstance{},
	}
	wildcard := "0.0.0.0"
	switch cfg.Family {
	case v1.IPv4Protocol:
		s.network = "tcp4"
	case v1.IPv6Protocol:
		s.network, wildcard = "tcp6", "::"
	default:
		s.network = "tcp"
	}
	for _, a := range cfg.Addresses {
		s.hosts = append(s.hosts, a.String())
	}
	if len(s.hosts) == 0 {
		s.hosts = []string{wildcard}
	}
	if s.listener == nil {
		s.listener = StdListener{}
	}
	if s.log.GetSink() == nil {
		s.log = klog.Background()
	}
	return s
}

// SyncServices makes newServices (Service → healthCheckNodePort) the set of
// health checks. Services no longer present, or whose port changed, are
// closed; new ones are opened (while Run is running); the others are left
// alone. A port that cannot be bound does not stop the others: every failure
// is logged and returned, joined, as a *ListenError, and is retried on the
// next call.
func (s *ServiceHealthServer) SyncServices(newServices map[types.NamespacedName]uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	for _, nsn := range sortedKeys(s.services) {
		inst := s.services[nsn]
		if port, found := newServices[nsn]; !found || port != inst.port {
			s.log.V(2).Info("Closing healthcheck", "service", nsn, "port", inst.port)
			s.closeInstance(nsn, inst)
			delete(s.services, nsn)
		}
	}
	for _, nsn := range sortedKeys(newServices) {
		if s.services[nsn] == nil {
			s.services[nsn] = &hcInstance{port: newServices[nsn]}
		}
	}
	return s.openAll()
}

// SyncEndpoints sets the number of local endpoints of each Service. Services
// missing from newEndpoints have none; entries for Services without a health
// check are ignored.
func (s *ServiceHealthServer) SyncEndpoints(newEndpoints map[types.NamespacedName]int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nsn, inst := range s.services {
		inst.endpoints = newEndpoints[nsn]
	}
	return nil
}

// Run opens the health checks recorded so far and keeps them in sync with
// SyncServices until ctx ends; it then closes every server, waits for them to
// stop, and returns nil. Listen failures while opening are logged (and
// returned by the next SyncServices); they do not end Run. Run may be called
// only once.
func (s *ServiceHealthServer) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running || s.stopped {
		s.mu.Unlock()
		return errors.New("service health server: Run called twice")
	}
	s.running = true
	_ = s.openAll() // failures are logged by openAll
	s.mu.Unlock()

	<-ctx.Done()

	s.mu.Lock()
	s.running, s.stopped = false, true
	for _, nsn := range sortedKeys(s.services) {
		s.closeInstance(nsn, s.services[nsn])
	}
	s.mu.Unlock()
	s.serving.Wait()
	return nil
}

// openAll opens every instance that is not open, if running. Caller holds mu.
func (s *ServiceHealthServer) openAll() error {
	if !s.running {
		return nil
	}
	var errs []error
	for _, nsn := range sortedKeys(s.services) {
		inst := s.services[nsn]
		if inst.servers != nil {
			continue
		}
		s.log.V(2).Info("Opening healthcheck", "service", nsn, "port", inst.port)
		if err := s.openInstance(nsn, inst); err != nil {
			s.log.Error(err, "Failed to start healthcheck", "node", s.nodeName, "service", nsn, "port", inst.port)
			errs = append(errs, &ListenError{Service: nsn, Port: inst.port, Err: err})
		}
	}
	return errors.Join(errs...)
}

// openInstance listens on every address and serves each. On any failure it
// closes what it opened (so a retry, or another owner of the port, can bind)
// and returns the error. Caller holds mu.
func (s *ServiceHealthServer) openInstance(nsn types.NamespacedName, inst *hcInstance) error {
	for _, host := range s.hosts {
		addr := net.JoinHostPort(host, strconv.Itoa(int(inst.port)))
		l, err := s.listener.Listen(context.Background(), s.network, addr)
		if err != nil {
			s.closeInstance(nsn, inst)
			return err
		}
		srv := httpserve.New(serviceHandler{name: nsn, s: s})
		inst.servers = append(inst.servers, srv)
		inst.listeners = append(inst.listeners, l)
		s.serving.Add(1)
		// Serve ends when the server is closed: by SyncServices, or by Run
		// when its context ends.
		go func() {
			defer s.serving.Done()
			s.log.V(3).Info("Serving healthcheck", "service", nsn, "address", l.Addr().String())
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error(err, "Healthcheck closed", "service", nsn)
			}
		}()
	}
	return nil
}

// closeInstance closes inst's servers, if open. The sockets are closed here,
// not when the serving goroutines get to it, so the ports are free on return.
// Caller holds mu.
func (s *ServiceHealthServer) closeInstance(nsn types.NamespacedName, inst *hcInstance) {
	for _, srv := range inst.servers {
		if err := srv.Close(); err != nil {
			s.log.Error(err, "Error closing healthcheck server", "service", nsn)
		}
	}
	for _, l := range inst.listeners {
		_ = l.Close() // already closed by srv.Close once Serve has started
	}
	inst.servers, inst.listeners = nil, nil
}

// serviceHandler answers one Service's health check.
type serviceHandler struct {
	name types.NamespacedName
	s    *ServiceHealthServer
}

func (h serviceHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.s.mu.RLock()
	inst, ok := h.s.services[h.name]
	count := 0
	if ok {
		count = inst.endpoints
	}
	h.s.mu.RUnlock()
	if !ok {
		// A request that raced with the Service's removal: kube-proxy answers
		// nothing (an empty 200).
		h.s.log.Error(nil, "Received request for closed healthcheck", "service", h.name)
		return
	}
	healthy := true
	if h.s.health != nil {
		healthy = h.s.health.Health().Healthy
	}

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
	if count != 0 && healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = fmt.Fprint(w, serviceBody(h.name, count, healthy))
}

// serviceBody is kube-proxy's response body, byte for byte: indented with
// tabs, no trailing newline.
func serviceBody(name types.NamespacedName, count int, healthy bool) string {
	return fmt.Sprintf("{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		name.Namespace, name.Name, count, healthy)
}

// sortedKeys returns m's keys in namespace/name order, so logs and errors are
// deterministic.
func sortedKeys[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return keys
}
