package datapathbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/cgroup"
	"github.com/svcnet/svcnet/internal/netns"
)

// Load generator settings.
const (
	// workers is the number of keep-alive connections, and of new-connection
	// workers.
	workers = 8
	// requestTimeout bounds one connect and one request.
	requestTimeout = 2 * time.Second
	// maxLatencySamples bounds the connect times kept per worker.
	maxLatencySamples = 200000
)

// sample is one side of a pair: the figures of the direct reference or of
// the Service over its turns.
type sample struct {
	keepAlive float64         // HTTP requests/s over workers keep-alive connections
	newConn   float64         // connect+GET+close per second over workers workers
	connect   []time.Duration // TCP handshake time of each new connection, under load
	probe     []time.Duration // TCP handshake time of one client's back-to-back connects, no other load
	errors    int             // failed connects or requests, all loads
	firstErr  error           // the first of them
}

// end is where one side's load goes: sockets made in the side's client
// namespace, the address and the HTTP request for it; errs collects the
// side's failures.
type end struct {
	sockets *socketFactory
	ap      netip.AddrPort
	req     []byte
	errs    failures
}

// measurePair measures a target's two sides in turns (turns.go), from its
// cgroup when it has one, starting with side first: the keep-alive load for d a side, the new-connection load
// for d a side, then the connect probe for d/2 a side, each from the side's
// namespace to its address. It fails with errStarved when a side of a load
// was not loaded (starved), else when a side had no request answered.
func measurePair(ctx context.Context, t target, d time.Duration, first int) (direct, service sample, err error) {
	if t.cgroup != "" {
		back, err := cgroup.Enter(t.cgroup)
		if err != nil {
			return direct, service, err
		}
		defer func() {
			if berr := back(); berr != nil && err == nil {
				err = berr
			}
		}()
	}
	var ends [2]*end
	for i, x := range []struct {
		ns   *netns.NS
		addr string
	}{sideDirect: {t.directNS, t.directAddr}, sideService: {t.serviceNS, t.svcAddr}} {
		ap, err := netip.ParseAddrPort(x.addr)
		if err != nil {
			return direct, service, fmt.Errorf("load to %q: %w", x.addr, err)
		}
		family := unix.AF_INET
		if ap.Addr().Is6() {
			family = unix.AF_INET6
		}
		// No "Connection: close": in the new-connection load the client
		// closes first, so TIME_WAIT stays on the client's side (reused at
		// once with tcp_tw_reuse) and the server's ports never collide with
		// an old connection's TIME_WAIT.
		req := []byte("GET / HTTP/1.1\r\nHost: " + ap.String() + "\r\n\r\n")
		ends[i] = &end{sockets: startSockets(ctx, x.ns, family), ap: ap, req: req}
	}
	var ss [2]sample
	ka, kaHad := keepAlive(ctx, ends, d, first)
	var kaErrs [2]int
	for i, e := range ends {
		kaErrs[i] = e.errs.count()
	}
	nc, ncHad, lat := newConns(ctx, ends, d, first)
	probe := connectProbe(ctx, ends, d, first)
	for i, e := range ends {
		s := &ss[i]
		s.keepAlive, s.newConn = perSecond(ka[i], kaHad[i]), perSecond(nc[i], ncHad[i])
		s.connect, s.probe = lat[i], probe[i]
		s.errors, s.firstErr = e.errs.count(), e.errs.first()
		if serr := e.sockets.stop(); serr != nil && err == nil {
			err = serr
		}
	}
	for i, s := range ss {
		kaLoad := loadDone{had: kaHad[i], oks: ka[i], errs: kaErrs[i]}
		ncLoad := loadDone{had: ncHad[i], oks: nc[i], errs: s.errors - kaErrs[i]}
		if err == nil && (kaLoad.starved(d) || ncLoad.starved(d)) {
			err = fmt.Errorf("load to %s: %w: keep-alive %s, new connections %s, of %s", ends[i].ap, errStarved, kaLoad, ncLoad, d)
		}
	}
	for i, s := range ss {
		if err == nil && (s.keepAlive == 0 || s.newConn == 0) {
			err = fmt.Errorf("load to %s: no request succeeded (%d errors, the first: %v)", ends[i].ap, s.errors, s.firstErr)
		}
	}
	return ss[sideDirect], ss[sideService], err
}

// errStarved is measurePair's failure when a side of a load was not loaded:
// the turns run by the clock, and while the load generator's workers are not
// scheduled (a loaded machine: seen at 38 keep-alive requests/s where 10,000
// were usual) the turns that fall due pass with no operation, so a side
// may get under half its time, or its time with no request finished, neither
// answered nor failed (a failed connect or request, a timeout included, is
// an error). Such a pair measures the machine, not the path; it is measured
// again (measureSlot).
var errStarved = errors.New("side starved: the load generator was not scheduled in its turns")

// loadDone is one side of one load: the time it had, its answers and its
// errors.
type loadDone struct {
	had       time.Duration
	oks, errs int
}

// starved reports whether the side was not loaded: under half of d, or no
// request finished either way.
func (l loadDone) starved(d time.Duration) bool { return l.had < d/2 || l.oks+l.errs == 0 }

func (l loadDone) String() string {
	return fmt.Sprintf("%d answered and %d failed in %s", l.oks, l.errs, l.had.Round(time.Millisecond))
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// perWorker runs fn in workers goroutines and waits for all.
func perWorker(fn func(w int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w)
		}()
	}
	wg.Wait()
}

// failures counts a load's failed connects and requests, safe for its
// workers, and keeps the first error to say what failed.
type failures struct {
	mu       sync.Mutex
	n        int
	earliest error
}

func (f *failures) add(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.earliest == nil {
		f.earliest = err
	}
}

func (f *failures) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *failures) first() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.earliest
}

// keepAlive sends HTTP GETs back to back on workers keep-alive connections a
// side, in turns, each side for d, and returns each side's answers (HTTP 200)
// and the time it had. Every connection is opened before the turns begin; a
// failed one is counted in its side's errors and redialled in a later turn of
// that side.
func keepAlive(ctx context.Context, ends [2]*end, d time.Duration, first int) (oks [2]int, had [2]time.Duration) {
	type conn struct {
		c  net.Conn
		br *bufio.Reader
	}
	dial := func(s int) *conn {
		c, err := ends[s].sockets.dial(ctx, ends[s].ap)
		if err != nil {
			ends[s].errs.add(err)
			return nil
		}
		_ = c.SetDeadline(time.Now().Add(2*d + requestTimeout))
		return &conn{c, bufio.NewReader(c)}
	}
	conns := make([][2]*conn, workers)
	for w := range conns {
		for s := range ends {
			conns[w][s] = dial(s)
		}
	}
	counts := make([][2]int, workers)
	t := startTurns(ctx, first, d)
	perWorker(func(w int) {
		for s := t.side(); s >= 0; s = t.side() {
			cn := conns[w][s]
			if cn == nil {
				conns[w][s] = dial(s)
				continue
			}
			if err := roundTrip(cn.c, cn.br, ends[s].req); err != nil {
				ends[s].errs.add(fmt.Errorf("request: %w", err))
				cn.c.Close()
				conns[w][s] = nil
				continue
			}
			counts[w][s]++
		}
	})
	had = t.wait()
	for w := range counts {
		for s := range ends {
			oks[s] += counts[w][s]
			if conns[w][s] != nil {
				conns[w][s].c.Close()
			}
		}
	}
	return oks, had
}

// newConns makes new connections in turns, each side for d, each: connect,
// one GET, read the answer, close (the client first). It returns each side's
// answered connections, the time it had, and the connect time of each of its
// successful connects; failures go to the side's errors.
func newConns(ctx context.Context, ends [2]*end, d time.Duration, first int) (oks [2]int, had [2]time.Duration, lat [2][]time.Duration) {
	counts := make([][2]int, workers)
	lats := make([][2][]time.Duration, workers)
	t := startTurns(ctx, first, d)
	perWorker(func(w int) {
		for s := t.side(); s >= 0; s = t.side() {
			t0 := time.Now()
			c, err := ends[s].sockets.dial(ctx, ends[s].ap)
			if err != nil {
				ends[s].errs.add(err)
				continue
			}
			if len(lats[w][s]) < maxLatencySamples {
				lats[w][s] = append(lats[w][s], time.Since(t0))
			}
			_ = c.SetDeadline(time.Now().Add(requestTimeout))
			if err := roundTrip(c, bufio.NewReader(c), ends[s].req); err != nil {
				ends[s].errs.add(fmt.Errorf("request: %w", err))
			} else {
				counts[w][s]++
			}
			c.Close()
		}
	})
	had = t.wait()
	for w := range counts {
		for s := range ends {
			oks[s] += counts[w][s]
			lat[s] = append(lat[s], lats[w][s]...)
		}
	}
	return oks, had, lat
}

// connectProbe connects and closes (the client first) back to back from one
// client for d/2 a side, the sides alternating in the order of turnOrder
// connect by connect, and returns each side's connect times: the latency of
// a new connection's first packets through the path, not the queueing of a
// loaded machine (the new-connection load's connect times).
func connectProbe(ctx context.Context, ends [2]*end, d time.Duration, first int) (lat [2][]time.Duration) {
	until := time.Now().Add(d)
	for i := 0; time.Now().Before(until) && ctx.Err() == nil && len(lat[0])+len(lat[1]) < maxLatencySamples; i++ {
		s := turnSide(first, i)
		t0 := time.Now()
		c, err := ends[s].sockets.dial(ctx, ends[s].ap)
		if err != nil {
			ends[s].errs.add(err)
			continue
		}
		lat[s] = append(lat[s], time.Since(t0))
		c.Close()
	}
	return lat
}

// roundTrip writes req and reads one response whole; an answer other than 200
// is an error.
func roundTrip(c net.Conn, br *bufio.Reader, req []byte) error {
	if _, err := c.Write(req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// clientSysctls are what the load wants in the client's namespace.
//
// tcp_tw_reuse=1 lets a closed connection's port be reused a second later. A
// low tcp_max_tw_buckets keeps the TIME_WAIT sockets few (beyond it a closing
// socket skips TIME_WAIT; its FIN and last ACK are still sent): at about
// 8,000 connections/s the ephemeral range (28,000 ports) was full of
// TIME_WAIT sockets after four seconds, and from then on every connect()
// searched the whole range for a port, about 3 ms each, and the rate of the
// direct and the Service runs fell alike to a few hundred/s.
//
// accept_redirects=0 (all, default and, in tuneClient, every interface: a
// host takes a redirect when either says yes): the external client's direct
// reference goes to the pod via node1, which forwards it out of the interface
// it came in on to node2, a neighbour of the client, so node1 sends the
// client an ICMP redirect. A client that takes it sends straight to node2,
// node1 sees only the replies, finds them conntrack-INVALID and drops them,
// and the reference path is dead for the redirect's five minutes (seen:
// every connect from the reference address timed out after one redirect).
var clientSysctls = []struct{ path, value string }{
	{"/proc/sys/net/ipv4/tcp_tw_reuse", "1"},
	{"/proc/sys/net/ipv4/tcp_max_tw_buckets", "4096"},
	{"/proc/sys/net/ipv4/conf/all/accept_redirects", "0"},
	{"/proc/sys/net/ipv4/conf/default/accept_redirects", "0"},
}

// tuneClient writes clientSysctls in ns, and accept_redirects=0 of each of
// its interfaces, and only there: the writes happen on a thread inside ns,
// and /proc/sys/net is per namespace.
func tuneClient(ns *netns.NS) error {
	return ns.Do(func() error {
		ifaces, err := filepath.Glob("/proc/sys/net/ipv4/conf/*/accept_redirects")
		if err != nil {
			return err
		}
		for _, s := range clientSysctls {
			if err := os.WriteFile(s.path, []byte(s.value+"\n"), 0o644); err != nil {
				return fmt.Errorf("%s in %s: %w", s.path, ns.Name(), err)
			}
		}
		for _, p := range ifaces {
			if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
				return fmt.Errorf("%s in %s: %w", p, ns.Name(), err)
			}
		}
		return nil
	})
}
