package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/dns/zone"
	"github.com/svcnet/svcnet/internal/model"
)

// shutdownTimeout bounds how long Run waits, once its context ends, for
// queries in flight (a forward takes at most forwardTimeout per upstream).
const shutdownTimeout = 5 * time.Second

// Server is the cluster DNS server. Create it with NewServer and Run it once.
// ServeDNS, Addr and Ready are safe for concurrent use.
type Server struct {
	cfg       ServerConfig
	zoneCfg   zone.Config
	store     *model.Store
	log       klog.Logger
	metrics   *Metrics
	forwarder *forwarder
	// base is the forwarding of the configuration (Upstreams); fwd the one in
	// force (SetForwarding).
	base Forwarding
	fwd  atomic.Pointer[Forwarding]

	// view is the zone being served; nil until the source has synced.
	view atomic.Pointer[zone.View]
	// outside answers, from an empty model, whether a question is the zone's
	// at all: names outside it are forwarded or refused even before sync.
	outside *zone.View

	addr    atomic.Pointer[net.UDPAddr]
	started chan struct{}
	// baseCtx is Run's context: forwards in flight end with it.
	baseCtx context.Context
}

// NewServer checks cfg and returns a server answering from store. It starts
// no goroutine and opens no socket.
func NewServer(cfg ServerConfig, store *model.Store) (*Server, error) {
	cfg = cfg.withDefaults()
	ups, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	zc := cfg.zoneConfig()
	s := &Server{
		cfg:     cfg,
		zoneCfg: zc,
		store:   store,
		log:     cfg.Logger.WithName("dns"),
		metrics: cfg.Metrics,
		outside: zone.Build(zc, nil),
		started: make(chan struct{}),
		baseCtx: context.Background(),
	}
	s.forwarder = &forwarder{timeout: forwardTimeout}
	s.base = Forwarding{Upstreams: ups}
	s.fwd.Store(&s.base)
	return s, nil
}

// Base returns the forwarding the configuration gives (its Upstreams).
func (s *Server) Base() Forwarding { return s.base }

// SetForwarding replaces where names outside the zone go, from the next
// query on (queries in flight finish with the old one); nil restores Base.
func (s *Server) SetForwarding(f *Forwarding) {
	if f == nil {
		f = &s.base
	}
	s.fwd.Store(f)
	s.log.Info("Forwarding", "to", f.String())
}

// Addr returns the address the server listens on (the same port on UDP and
// TCP), or nil before Run has opened its sockets.
func (s *Server) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return a
	}
	return nil
}

// Started is closed once Run listens on both UDP and TCP (never if Run fails
// to listen).
func (s *Server) Started() <-chan struct{} { return s.started }

// Ready reports whether the server answers from a synced model (it stays
// true once set: later answers come from the latest synced model).
func (s *Server) Ready() bool { return s.view.Load() != nil }

// Metrics returns the server's metrics.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Run listens on UDP and TCP, keeps the served zone current with the store,
// and serves until ctx ends; then it stops the listeners, waits (bounded) for
// queries in flight and returns nil. It returns an error when it cannot
// listen or a listener fails. Call it once.
func (s *Server) Run(ctx context.Context) error {
	pc, l, err := listenPair(ctx, s.cfg.Listen)
	if err != nil {
		return err
	}
	s.baseCtx = ctx
	s.addr.Store(pc.LocalAddr().(*net.UDPAddr))
	// UDPSize is the read buffer: a query may carry EDNS0 options and exceed
	// 512 bytes, which the library's default buffer would cut off.
	udp := &dns.Server{PacketConn: pc, Handler: s, MsgAcceptFunc: acceptQueries, MsgInvalidFunc: s.countInvalid, UDPSize: dns.MaxMsgSize}
	tcp := &dns.Server{Listener: l, Handler: s, MsgAcceptFunc: acceptQueries, MsgInvalidFunc: s.countInvalid}
	s.log.Info("Serving DNS", "address", pc.LocalAddr().String(), "zone", s.cfg.Zone,
		"upstreams", s.cfg.Upstreams, "ttl", s.cfg.TTL)

	g, gctx := errgroup.WithContext(ctx)
	udpUp, tcpUp := make(chan struct{}), make(chan struct{})
	g.Go(func() error { return serveUntil(gctx, udp, udpUp, "udp") })
	g.Go(func() error { return serveUntil(gctx, tcp, tcpUp, "tcp") })
	g.Go(func() error { return s.program(gctx) })
	g.Go(func() error {
		for _, c := range []chan struct{}{udpUp, tcpUp} {
			select {
			case <-c:
			case <-gctx.Done():
				return nil
			}
		}
		close(s.started)
		return nil
	})
	err = g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// serveUntil serves srv (with its listener set) until ctx ends, then shuts it
// down. up is closed once srv is serving. It returns an error when srv fails
// or stops on its own, nil after a shutdown.
func serveUntil(ctx context.Context, srv *dns.Server, up chan struct{}, network string) error {
	srv.NotifyStartedFunc = func() { close(up) }
	errc := make(chan error, 1)
	go func() { errc <- srv.ActivateAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("dns server on %s: %w", network, err)
	case <-up:
	}
	select {
	case err := <-errc:
		if err == nil {
			err = errors.New("stopped")
		}
		return fmt.Errorf("dns server on %s: %w", network, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.ShutdownContext(sctx); err != nil {
		return fmt.Errorf("dns server on %s: shutdown: %w", network, err)
	}
	<-errc
	return nil
}

// acceptQueries lets every request through to ServeDNS, which answers
// FORMERR and NOTIMP itself (so they are counted); only responses are
// dropped, unanswered.
func acceptQueries(dh dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if dh.Bits&qr != 0 {
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}

// countInvalid counts the queries the dns library answered FORMERR because
// they did not parse. Shorter packets than a header get no answer, and are
// not counted.
func (s *Server) countInvalid(m []byte, err error) {
	if len(m) < 12 {
		return
	}
	s.metrics.Requests.WithLabelValues(typeOther, rcodeLabel(dns.RcodeFormatError)).Inc()
	s.log.V(4).Info("Malformed query", "error", err)
}
