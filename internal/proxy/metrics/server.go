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

// NewServer returns a server for m on addr (host:port; "" means
// DefaultMetricsBindAddress). To disable metrics, as kube-proxy does for an
// empty --metrics-bind-address, do not run a server at all. With profiling
// set it also serves Go's profiles under /debug/pprof/, as kube-proxy does
// with --profiling.
func NewServer(addr string, m *Metrics, log klog.Logger, profiling bool) *Server {
	if addr == "" {
		addr = DefaultMetricsBindAddress
	}
	if log.GetSink() == nil {
		log = klog.Background()
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	if profiling {
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
