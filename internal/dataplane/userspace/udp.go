package userspace

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// maxDatagram is the largest UDP payload.
const maxDatagram = 64 << 10

// udpPort is a UDP proxy port: one socket, and a session per client
// address, each with its own connected socket to the endpoint chosen for
// that client. Replies leave from the proxy socket, so the client sees the
// address it sent to (after the redirect is undone by conntrack).
type udpPort struct {
	p    *Proxy
	pp   *proxyPort
	conn net.PacketConn

	mu       sync.Mutex
	closed   bool
	sessions map[string]*udpSession // by client address
}

type udpSession struct {
	u      *udpPort
	client net.Addr
	key    string
	ep     netip.AddrPort
	up     net.Conn

	mu    sync.Mutex
	last  time.Time // last datagram either way
	timer *time.Timer
	once  sync.Once
}

func newUDPPort(p *Proxy, pp *proxyPort, c net.PacketConn) *udpPort {
	return &udpPort{p: p, pp: pp, conn: c, sessions: map[string]*udpSession{}}
}

// readLoop forwards every datagram of the proxy socket to its client's
// session until the socket closes.
func (u *udpPort) readLoop() {
	buf := make([]byte, maxDatagram)
	var pause time.Duration
	for {
		n, from, err := u.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || !u.p.backOff(u.pp, &pause, err) {
				u.close()
				return
			}
			continue
		}
		pause = 0
		s := u.session(from)
		if s == nil {
			u.p.stats.udpDropped.Add(1)
			continue // no endpoint, or too many sessions
		}
		s.touch()
		if _, err := s.up.Write(buf[:n]); err != nil {
			// The endpoint refused an earlier datagram (ICMP port
			// unreachable): end the session, the next datagram opens another.
			u.p.stats.udpDropped.Add(1)
			s.fail()
		}
	}
}

// session returns from's session, opening one if there is none and the cap
// allows; nil drops the datagram.
func (u *udpPort) session(from net.Addr) *udpSession {
	k := from.String()
	u.mu.Lock()
	if s := u.sessions[k]; s != nil || u.closed {
		u.mu.Unlock()
		return s
	}
	full := len(u.sessions) >= u.p.cfg.MaxUDPSessions
	u.mu.Unlock()
	if full {
		u.p.cfg.Log.V(1).Info("udp session limit reached, datagram dropped", "port", u.pp.key.String(), "client", k)
		return nil
	}
	up, ep, err := u.p.connect(u.pp, "udp", unmapped(from))
	if err != nil {
		u.p.cfg.Log.V(1).Info("dropped", "port", u.pp.key.String(), "client", k, "err", err)
		return nil
	}
	u.p.stats.udpSessions.Add(1)
	s := &udpSession{u: u, client: from, key: k, ep: ep, up: up, last: time.Now()}
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		up.Close()
		u.pp.bal.released(ep)
		return nil
	}
	u.sessions[k] = s
	s.mu.Lock()
	s.timer = time.AfterFunc(u.p.cfg.UDPIdleTimeout, s.idle)
	s.mu.Unlock()
	u.mu.Unlock()
	u.p.wg.Add(1)
	go func() {
		defer u.p.wg.Done()
		s.replies()
	}()
	return s
}

// replies sends every datagram from the endpoint back to the client from
// the proxy socket, until the session ends.
func (s *udpSession) replies() {
	defer s.end()
	buf := make([]byte, maxDatagram)
	for {
		n, err := s.up.Read(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				s.fail()
			}
			return
		}
		s.touch()
		if _, err := s.u.conn.WriteTo(buf[:n], s.client); err != nil {
			return
		}
	}
}

func (s *udpSession) touch() {
	s.mu.Lock()
	s.last = time.Now()
	s.mu.Unlock()
}

// idle ends the session if it saw no datagram for the idle timeout, else
// waits for the rest of it.
func (s *udpSession) idle() {
	s.mu.Lock()
	left := s.u.p.cfg.UDPIdleTimeout - time.Since(s.last)
	if left > 0 {
		s.timer.Reset(left)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.end()
}

// fail ends the session after its endpoint refused a datagram: the client
// is no longer pinned to that endpoint.
func (s *udpSession) fail() {
	s.u.pp.bal.failed(unmapped(s.client), s.ep)
	s.end()
}

// end closes the session once: its socket, its timer, its place in the
// port and its count on the endpoint.
func (s *udpSession) end() {
	s.once.Do(func() {
		s.u.mu.Lock()
		if s.u.sessions[s.key] == s {
			delete(s.u.sessions, s.key)
		}
		s.u.mu.Unlock()
		s.mu.Lock()
		s.timer.Stop()
		s.mu.Unlock()
		s.up.Close()
		s.u.pp.bal.released(s.ep)
	})
}

// close closes the proxy socket and ends every session.
func (u *udpPort) close() {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return
	}
	u.closed = true
	ss := make([]*udpSession, 0, len(u.sessions))
	for _, s := range u.sessions {
		ss = append(ss, s)
	}
	u.mu.Unlock()
	u.conn.Close()
	for _, s := range ss {
		s.end()
	}
}

// sessionCount returns the open sessions.
func (u *udpPort) sessionCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.sessions)
}
