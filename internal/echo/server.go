package echo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/httpserve"
)

// Serve serves cfg until ctx ends, then closes every socket and connection
// and returns nil once all its goroutines have stopped. It fails at once if a
// port cannot be opened, and returns the error of a socket that fails on its
// own. Serve reads the namespace's addresses and opens every socket on the
// calling goroutine before it starts any other, so running it inside
// netns.NS.Do serves that namespace. Every connection and datagram is logged
// at V(1).
func Serve(ctx context.Context, cfg Config, log klog.Logger) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	s := &server{cfg: cfg, log: log}
	if err := s.listen(); err != nil {
		s.closeAll()
		return err
	}
	if cfg.Ready != nil {
		tcp := make([]net.Addr, len(s.tcp))
		for i, l := range s.tcp {
			tcp[i] = l.Addr()
		}
		udp := make([]net.Addr, len(s.udp))
		for i, c := range s.udp {
			udp[i] = c.LocalAddr()
		}
		cfg.Ready(tcp, udp)
	}
	log.Info("serving", "pod", cfg.Name, "node", cfg.Node, "podIP", addrString(cfg), "tcp", cfg.TCP, "udp", cfg.UDP)
	return s.run(ctx)
}

type server struct {
	cfg   Config
	log   klog.Logger
	tcp   []net.Listener
	udp   []net.PacketConn
	conns sync.WaitGroup // line-protocol and sniffing connections
}

func (s *server) listen() error {
	for _, p := range s.cfg.TCP {
		l, err := net.Listen("tcp", net.JoinHostPort(s.cfg.Host, strconv.Itoa(p)))
		if err != nil {
			return fmt.Errorf("echo: listen tcp port %d: %w", p, err)
		}
		s.tcp = append(s.tcp, l)
	}
	for _, p := range s.cfg.UDP {
		c, err := net.ListenPacket("udp", net.JoinHostPort(s.cfg.Host, strconv.Itoa(p)))
		if err != nil {
			return fmt.Errorf("echo: listen udp port %d: %w", p, err)
		}
		s.udp = append(s.udp, c)
	}
	return nil
}

func (s *server) closeAll() {
	for _, l := range s.tcp {
		l.Close()
	}
	for _, c := range s.udp {
		c.Close()
	}
}

func (s *server) run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	stop := context.AfterFunc(gctx, s.closeAll)
	defer stop()
	httpConns := newConnListener(s.tcp)
	if len(s.tcp) > 0 {
		srv := httpserve.New(s.handler())
		g.Go(func() error { return httpserve.Until(gctx, srv, httpConns) })
	}
	for _, l := range s.tcp {
		g.Go(func() error { return s.accept(gctx, l, httpConns) })
	}
	for _, c := range s.udp {
		g.Go(func() error { return s.serveUDP(gctx, c) })
	}
	err := g.Wait()
	s.closeAll()
	s.conns.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// accept hands every connection of l to its own goroutine until l closes.
func (s *server) accept(ctx context.Context, l net.Listener, httpConns *connListener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("echo: accept on %s: %w", l.Addr(), err)
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			s.serveTCP(ctx, c, httpConns)
		}()
	}
}

func addrString(cfg Config) string {
	if !cfg.PodIP.IsValid() {
		return ""
	}
	return cfg.PodIP.String()
}
