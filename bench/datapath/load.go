package datapathbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

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

// sample is one run of one path: both load figures.
type sample struct {
	keepAlive float64         // HTTP requests/s over workers keep-alive connections
	newConn   float64         // connect+GET+close per second over workers workers
	connect   []time.Duration // TCP handshake time of each new connection, under load
	probe     []time.Duration // TCP handshake time of one client's back-to-back connects, no other load
	errors    int             // failed connects or requests, all loads
	firstErr  error           // the first of them
}

// measure runs the keep-alive load and then the new-connection load, each for
// d, then the connect probe for d/2, from inside ns to addr (host:port). It
// fails when no request succeeded.
func measure(ctx context.Context, ns *netns.NS, addr string, d time.Duration) (sample, error) {
	var s sample
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return s, fmt.Errorf("load to %q: %w", addr, err)
	}
	family := unix.AF_INET
	if ap.Addr().Is6() {
		family = unix.AF_INET6
	}
	sockets := startSockets(ctx, ns, family)
	var errs failures
	s.keepAlive = float64(keepAlive(ctx, sockets, ap, d, &errs)) / d.Seconds()
	n, lat := newConns(ctx, sockets, ap, d, &errs)
	s.newConn, s.connect = float64(n)/d.Seconds(), lat
	s.probe = connectProbe(ctx, sockets, ap, d/2, &errs)
	s.errors, s.firstErr = errs.count(), errs.first()
	if err := sockets.stop(); err != nil {
		return s, err
	}
	if s.keepAlive == 0 || s.newConn == 0 {
		return s, fmt.Errorf("load to %s: no request succeeded (%d errors, the first: %v)", addr, s.errors, s.firstErr)
	}
	return s, nil
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

// keepAlive sends HTTP GETs back to back on workers keep-alive connections
// for d and returns the number answered 200 (a failed connection is counted
// in errs and redialled, bounded by the end of the run).
func keepAlive(ctx context.Context, sockets *socketFactory, ap netip.AddrPort, d time.Duration, errs *failures) int {
	oks := make([]int, workers)
	end := time.Now().Add(d)
	perWorker(func(w int) {
		req := []byte("GET / HTTP/1.1\r\nHost: " + ap.String() + "\r\n\r\n")
		for time.Now().Before(end) && ctx.Err() == nil {
			c, err := sockets.dial(ctx, ap)
			if err != nil {
				errs.add(err)
				continue
			}
			_ = c.SetDeadline(end.Add(requestTimeout))
			br := bufio.NewReader(c)
			for time.Now().Before(end) {
				if err := roundTrip(c, br, req); err != nil {
					errs.add(fmt.Errorf("request: %w", err))
					break
				}
				oks[w]++
			}
			c.Close()
		}
	})
	return sum(oks)
}

// newConns makes new connections for d, each: connect, one GET, read the
// answer, close (the client first). It returns the number answered and the
// connect time of each successful connect; failures go to errs.
func newConns(ctx context.Context, sockets *socketFactory, ap netip.AddrPort, d time.Duration, errs *failures) (ok int, lat []time.Duration) {
	oks := make([]int, workers)
	lats := make([][]time.Duration, workers)
	end := time.Now().Add(d)
	perWorker(func(w int) {
		// No "Connection: close": the client closes first, so TIME_WAIT stays on
		// the client's side (reused at once with tcp_tw_reuse) and the server's
		// ports never collide with an old connection's TIME_WAIT.
		req := []byte("GET / HTTP/1.1\r\nHost: " + ap.String() + "\r\n\r\n")
		for time.Now().Before(end) && ctx.Err() == nil {
			t0 := time.Now()
			c, err := sockets.dial(ctx, ap)
			if err != nil {
				errs.add(err)
				continue
			}
			if len(lats[w]) < maxLatencySamples {
				lats[w] = append(lats[w], time.Since(t0))
			}
			_ = c.SetDeadline(time.Now().Add(requestTimeout))
			if err := roundTrip(c, bufio.NewReader(c), req); err != nil {
				errs.add(fmt.Errorf("request: %w", err))
			} else {
				oks[w]++
			}
			c.Close()
		}
	})
	for _, l := range lats {
		lat = append(lat, l...)
	}
	return sum(oks), lat
}

// connectProbe connects and closes (the client first) back to back from one
// client for d, with no other load, and returns each connect's time: the
// latency of a new connection's first packets through the path, not the
// queueing of a loaded machine (the new-connection load's connect times).
func connectProbe(ctx context.Context, sockets *socketFactory, ap netip.AddrPort, d time.Duration, errs *failures) (lat []time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil && len(lat) < maxLatencySamples {
		t0 := time.Now()
		c, err := sockets.dial(ctx, ap)
		if err != nil {
			errs.add(err)
			continue
		}
		lat = append(lat, time.Since(t0))
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

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// clientSysctls are what the new-connection load wants in the client's
// namespace. tcp_tw_reuse=1 lets a closed connection's port be reused a
// second later. A low tcp_max_tw_buckets keeps the TIME_WAIT sockets few
// (beyond it a closing socket skips TIME_WAIT; its FIN and last ACK are still
// sent): at about 8,000 connections/s the ephemeral range (28,000 ports) was
// full of TIME_WAIT sockets after four seconds, and from then on every
// connect() searched the whole range for a port, about 3 ms each, and the
// rate of the direct and the Service runs fell alike to a few hundred/s.
var clientSysctls = []struct{ path, value string }{
	{"/proc/sys/net/ipv4/tcp_tw_reuse", "1"},
	{"/proc/sys/net/ipv4/tcp_max_tw_buckets", "4096"},
}

// tuneClient writes clientSysctls in ns, and only there: the writes happen
// on a thread inside ns, and /proc/sys/net is per namespace.
func tuneClient(ns *netns.NS) error {
	return ns.Do(func() error {
		for _, s := range clientSysctls {
			if err := os.WriteFile(s.path, []byte(s.value+"\n"), 0o644); err != nil {
				return fmt.Errorf("%s in %s: %w", s.path, ns.Name(), err)
			}
		}
		return nil
	})
}
