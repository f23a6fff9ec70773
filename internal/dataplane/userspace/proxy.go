package userspace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// DialFunc opens a connection to an endpoint ("tcp" or "udp", "addr:port").
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// ListenFunc opens a TCP proxy port ("tcp", "addr:0").
type ListenFunc func(network, address string) (net.Listener, error)

// ListenPacketFunc opens a UDP proxy port ("udp", "addr:0").
type ListenPacketFunc func(network, address string) (net.PacketConn, error)

// Defaults for the zero values of Config.
const (
	DefaultAttempts       = 3
	DefaultDialTimeout    = time.Second
	DefaultRetryBudget    = 3 * time.Second
	DefaultUDPIdleTimeout = 250 * time.Millisecond // kube-proxy's --udp-timeout
	DefaultMaxUDPSessions = 1024
)

// Config is what a Proxy needs. Only Listen is required.
type Config struct {
	// Listen is the address proxy ports of each family listen on (port 0:
	// the kernel picks one per proxy port). A Service port of a family
	// without an address is not served (Update reports it).
	Listen map[ipfamily.Family]netip.Addr
	// Selection chooses endpoints; the zero value is RoundRobin.
	Selection Selection
	// Attempts bounds the endpoints tried for one connection (each at most
	// once): 1 means no retry. 0 means DefaultAttempts.
	Attempts int
	// DialTimeout bounds one connect; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// RetryBudget bounds the time of all attempts of one connection
	// together; 0 means DefaultRetryBudget.
	RetryBudget time.Duration
	// UDPIdleTimeout ends a UDP session that saw no datagram either way for
	// that long; 0 means DefaultUDPIdleTimeout.
	UDPIdleTimeout time.Duration
	// MaxUDPSessions bounds the sessions of one UDP proxy port: a datagram
	// from a new client beyond it is dropped. 0 means DefaultMaxUDPSessions.
	MaxUDPSessions int
	// Dial, ListenTCP and ListenUDP open sockets; nil means the net
	// package's, in the calling process's network namespace.
	Dial      DialFunc
	ListenTCP ListenFunc
	ListenUDP ListenPacketFunc
	// Log receives one line per refused or failed connection at V(1), per
	// retry at V(2); the zero value discards.
	Log klog.Logger
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.Attempts <= 0 {
		c.Attempts = DefaultAttempts
	}
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.RetryBudget, DefaultRetryBudget)
	def(&c.UDPIdleTimeout, DefaultUDPIdleTimeout)
	if c.MaxUDPSessions <= 0 {
		c.MaxUDPSessions = DefaultMaxUDPSessions
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
	if c.ListenTCP == nil {
		c.ListenTCP = net.Listen
	}
	if c.ListenUDP == nil {
		c.ListenUDP = net.ListenPacket
	}
	return c
}

// Set names the endpoint set a proxy port forwards to, as the nftables plane
// has a service chain and a local chain per Service port.
type Set uint8

const (
	// SetCluster forwards to ClusterEndpoints: ClusterIP traffic under
	// internalTrafficPolicy Cluster, external traffic under
	// externalTrafficPolicy Cluster, and the short-circuited traffic from
	// pods and the node under externalTrafficPolicy Local.
	SetCluster Set = iota
	// SetLocal forwards to LocalEndpoints: ClusterIP traffic under
	// internalTrafficPolicy Local, external traffic from outside under
	// externalTrafficPolicy Local.
	SetLocal
)

func (s Set) String() string {
	if s == SetLocal {
		return "local"
	}
	return "cluster"
}

// Key identifies a proxy port: one per Service port entry and endpoint set
// that entry uses.
type Key struct {
	ID     string // the ServicePort's ID
	Family ipfamily.Family
	Set    Set
}

func (k Key) String() string { return k.ID + " " + k.Family.String() + " " + k.Set.String() }

func (k Key) compare(o Key) int {
	return cmp.Or(cmp.Compare(k.ID, o.ID), cmp.Compare(k.Family, o.Family), cmp.Compare(k.Set, o.Set))
}

// Port is one open proxy port.
type Port struct {
	Key      Key
	Protocol model.Protocol
	Addr     netip.AddrPort // where it listens
}

// Proxy runs the proxy ports of a set of Service ports. Its methods are safe
// for concurrent use.
type Proxy struct {
	cfg    Config
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy started

	stats counters

	mu     sync.Mutex
	closed bool
	ports  map[Key]*proxyPort
	conns  map[net.Conn]struct{} // every open client and upstream TCP connection
}

// proxyPort is one listening socket and the endpoints it forwards to.
type proxyPort struct {
	key      Key
	proto    model.Protocol
	addr     netip.AddrPort
	bal      *balancer
	src      *servicetable.ServicePort // the entry last applied
	listener net.Listener
	udp      *udpPort
}

// New returns a Proxy with no port open.
func New(cfg Config) *Proxy {
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{cfg: cfg.withDefaults(), ctx: ctx, cancel: cancel, ports: map[Key]*proxyPort{}, conns: map[net.Conn]struct{}{}}
}

// want is one proxy port a Service port entry needs.
type want struct {
	key      Key
	proto    model.Protocol
	eps      []servicetable.Endpoint
	affinity time.Duration
}

// endpoints returns w's endpoint addresses.
func (w want) endpoints() []netip.AddrPort {
	out := make([]netip.AddrPort, len(w.eps))
	for i, ep := range w.eps {
		out[i] = netip.AddrPortFrom(ep.Addr, ep.Port)
	}
	return out
}

// wants returns the proxy ports sp needs: one per endpoint set its policies
// use (UsesClusterEndpoints, UsesLocalEndpoints), as the nftables plane
// renders a service chain and a local chain.
func wants(sp *servicetable.ServicePort) []want {
	var ws []want
	add := func(set Set, eps []servicetable.Endpoint) {
		ws = append(ws, want{key: Key{ID: sp.ID, Family: sp.Family, Set: set}, proto: sp.Protocol, eps: eps, affinity: sp.AffinityTimeout})
	}
	if sp.UsesClusterEndpoints() {
		add(SetCluster, sp.ClusterEndpoints)
	}
	if sp.UsesLocalEndpoints() {
		add(SetLocal, sp.LocalEndpoints)
	}
	return ws
}

// Update makes the open proxy ports those of entries, in place: a port whose
// key remains keeps its socket and its connections, and uses the new
// endpoints from the next connection on (a removed endpoint is never chosen
// again; connections to it run on); ports of removed entries close their
// socket (their TCP connections run on, their UDP sessions end). An entry
// is read again only when its pointer changed, as the service table's
// assembler reuses an unchanged one. An entry that cannot be served (a
// protocol other than TCP and UDP, a family without a listen address, a
// socket that cannot be opened, a duplicate) is left out, the error names
// it, and the other entries are applied.
func (p *Proxy) Update(entries []*servicetable.ServicePort) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("userspace proxy: update after close")
	}
	var errs []error
	seen := map[Key]bool{}
	type entryKey struct {
		id  string
		fam ipfamily.Family
	}
	listed := map[entryKey]bool{}
	for _, sp := range entries {
		ek := entryKey{sp.ID, sp.Family}
		if listed[ek] {
			errs = append(errs, fmt.Errorf("userspace proxy: Service port %s (%s): listed twice", sp.ID, sp.Family))
			continue
		}
		listed[ek] = true
		if sp.Protocol != model.ProtocolTCP && sp.Protocol != model.ProtocolUDP {
			errs = append(errs, fmt.Errorf("userspace proxy: Service port %s (%s): protocol %s is not supported (TCP and UDP only)", sp.ID, sp.Family, sp.Protocol))
			continue
		}
		for _, w := range wants(sp) {
			if pp := p.ports[w.key]; pp != nil {
				if pp.proto == w.proto {
					seen[w.key] = true
					if pp.src != sp { // an unchanged entry is the same pointer
						pp.src = sp
						pp.bal.set(w.endpoints(), w.affinity)
					}
					continue
				}
				p.closePort(pp)
				delete(p.ports, w.key)
			}
			pp, err := p.open(w)
			if err != nil {
				errs = append(errs, fmt.Errorf("userspace proxy: Service port %s (%s): %w", sp.ID, sp.Family, err))
				continue
			}
			pp.src = sp
			seen[w.key] = true
			p.ports[w.key] = pp
		}
	}
	for k, pp := range p.ports {
		if !seen[k] {
			p.closePort(pp)
			delete(p.ports, k)
		}
	}
	return errors.Join(errs...)
}

// open opens the socket of w and starts serving it.
func (p *Proxy) open(w want) (*proxyPort, error) {
	la, ok := p.cfg.Listen[w.key.Family]
	if !ok || !la.IsValid() {
		return nil, fmt.Errorf("no listen address for %s", w.key.Family)
	}
	hostPort := net.JoinHostPort(la.String(), "0")
	pp := &proxyPort{key: w.key, proto: w.proto, bal: newBalancer(p.cfg.Selection)}
	pp.bal.set(w.endpoints(), w.affinity)
	var a net.Addr
	if w.proto == model.ProtocolTCP {
		l, err := p.cfg.ListenTCP("tcp", hostPort)
		if err != nil {
			return nil, fmt.Errorf("listen tcp %s: %w", hostPort, err)
		}
		pp.listener, a = l, l.Addr()
	} else {
		c, err := p.cfg.ListenUDP("udp", hostPort)
		if err != nil {
			return nil, fmt.Errorf("listen udp %s: %w", hostPort, err)
		}
		pp.udp, a = newUDPPort(p, pp, c), c.LocalAddr()
	}
	pp.addr = addrPortOf(a)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if pp.listener != nil {
			p.acceptLoop(pp)
		} else {
			pp.udp.readLoop()
		}
	}()
	return pp, nil
}

func (p *Proxy) closePort(pp *proxyPort) {
	if pp.listener != nil {
		pp.listener.Close()
	}
	if pp.udp != nil {
		pp.udp.close()
	}
}

// Ports returns the open proxy ports, sorted by key.
func (p *Proxy) Ports() []Port {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Port, 0, len(p.ports))
	for _, pp := range p.ports {
		out = append(out, Port{Key: pp.key, Protocol: pp.proto, Addr: pp.addr})
	}
	slices.SortFunc(out, func(a, b Port) int { return a.Key.compare(b.Key) })
	return out
}

// Addr returns where the proxy port of k listens.
func (p *Proxy) Addr(k Key) (netip.AddrPort, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp := p.ports[k]; pp != nil {
		return pp.addr, true
	}
	return netip.AddrPort{}, false
}

// Close closes every proxy port, connection and session, and returns once
// every goroutine of the proxy has ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.cancel()
		for k, pp := range p.ports {
			p.closePort(pp)
			delete(p.ports, k)
		}
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// track registers c to be closed by Close; false (and c closed) when the
// proxy is closing.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// connect dials an endpoint of pp for client (the zero Addr: unknown),
// trying another endpoint after a failed connect, at most Attempts
// endpoints and RetryBudget in all.
func (p *Proxy) connect(pp *proxyPort, network string, client netip.Addr) (net.Conn, netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RetryBudget)
	defer cancel()
	var tried []netip.AddrPort
	var errs []error
	for range p.cfg.Attempts {
		ep, ok := pp.bal.pick(client, tried)
		if !ok {
			break
		}
		dctx, dcancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		c, err := p.cfg.Dial(dctx, network, ep.String())
		dcancel()
		if err == nil {
			pp.bal.connected(client, ep)
			return c, ep, nil
		}
		pp.bal.failed(client, ep)
		p.stats.failedConnects.Add(1)
		tried = append(tried, ep)
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
		p.cfg.Log.V(2).Info("connect failed, trying another endpoint", "port", pp.key.String(), "endpoint", ep.String(), "err", err)
	}
	if len(errs) == 0 {
		return nil, netip.AddrPort{}, errors.New("no endpoint")
	}
	return nil, netip.AddrPort{}, fmt.Errorf("%d endpoints failed: %w", len(errs), errors.Join(errs...))
}

// backOff logs err, a failure of pp's socket other than its closing, and
// waits before the next try: 5ms, doubling up to a second. False when the
// proxy closed meanwhile.
func (p *Proxy) backOff(pp *proxyPort, pause *time.Duration, err error) bool {
	*pause = min(max(2**pause, 5*time.Millisecond), time.Second)
	p.cfg.Log.Error(err, "proxy port failed, retrying", "port", pp.key.String(), "after", pause.String())
	t := time.NewTimer(*pause)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// addrPortOf returns a's address and port (the zero value for an address
// that is not IP, such as a pipe's).
func addrPortOf(a net.Addr) netip.AddrPort {
	if a == nil {
		return netip.AddrPort{}
	}
	switch a := a.(type) {
	case *net.TCPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case *net.UDPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return netip.AddrPort{}
	}
	ip, err1 := netip.ParseAddr(host)
	n, err2 := strconv.ParseUint(port, 10, 16)
	if err1 != nil || err2 != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip, uint16(n))
}

// unmapped returns a's address without a 4-in-6 mapping, or the zero Addr.
func unmapped(a net.Addr) netip.Addr {
	ap := addrPortOf(a)
	if !ap.IsValid() {
		return netip.Addr{}
	}
	return ap.Addr()
}
