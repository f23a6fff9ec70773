package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/httpserve"
)

// DefaultMetricsBindAddress is kube-proxy's --metrics-bind-address default.
const DefaultMetricsBindAddress = "127.0.0.1:10249"

// Server serves /metrics over HTTP. It opens nothing until Run or Serve.
type Server struct {
	addr    string
	handler http.Handler
	log     klog.Logger
}

// ServerOptions are what the metrics address serves besides /metrics.
type ServerOptions struct {
	// ProxyMode is the data plane's name, served as text/plain at /proxyMode
	// as kube-proxy serves its mode ("nftables"); "" serves 404 there.
	ProxyMode string
	// Profiling serves Go's profiles under /debug/pprof/, as kube-proxy does
	// with --profiling.
	Profiling bool
}

// NewServer returns a server for m on addr (host:port; "" means
// DefaultMetricsBindAddress). To disable metrics, as kube-proxy does for an
// empty --metrics-bind-address, do not run a server at all. Like kube-proxy's
// metrics address it also answers /healthz with "ok" (the process is up; the
// proxy's sync health is the healthz address's) and /proxyMode.
func NewServer(addr string, m *Metrics, log klog.Logger, opts ServerOptions) *Server {
	if addr == "" {
		addr = DefaultMetricsBindAddress
	}
	if log.GetSink() == nil {
		log = klog.Background()
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprint(w, "ok")
	})
	if opts.ProxyMode != "" {
		mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			fmt.Fprint(w, opts.ProxyMode)
		})
	}
	if opts.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return &Server{addr: addr, handler: mux, log: log}
}

// Run listens on the server's address and serves until ctx ends, then returns
// nil. It returns an error if the address cannot be bound or the server fails.
func (s *Server) Run(ctx context.Context) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("start metrics server on %s: %w", s.addr, err)
	}
	return s.Serve(ctx, l)
}

// Serve serves on l (which it closes) until ctx ends, then returns nil.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.log.V(2).Info("Serving metrics", "address", l.Addr().String())
	if err := httpserve.Until(ctx, httpserve.New(s.handler), l); err != nil {
		return fmt.Errorf("metrics server on %s: %w", l.Addr(), err)
	}
	return nil
}
