package failoverbench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// The client loop: a new request every requestInterval, each bounded by
// requestTimeout.
const (
	requestInterval = 10 * time.Millisecond
	requestTimeout  = time.Second
)

// result is one request of the client loop.
type result struct {
	start, end time.Time
	ok         bool
}

// loop starts a request to url every interval until ctx ends, each bounded by
// timeout, and keeps every result. At most maxInFlight run at once; a tick with
// that many in flight is skipped (and counted).
type loop struct {
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	addr     string
	interval time.Duration
	timeout  time.Duration

	mu      sync.Mutex
	results []result
	skipped int
}

const maxInFlight = 256

func (l *loop) run(ctx context.Context) {
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			l.mu.Lock()
			l.skipped++
			l.mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := result{start: time.Now()}
			r.ok = l.request(ctx) == nil
			r.end = time.Now()
			l.mu.Lock()
			l.results = append(l.results, r)
			l.mu.Unlock()
		}()
	}
}

// request makes one new connection, sends one HTTP request and reads the status.
func (l *loop) request(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	c, err := l.dial(ctx, "tcp", l.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", l.addr); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// firstSuccessAfter returns when the first request started at or after t0
// succeeded (its end), and whether there was one.
func (l *loop) firstSuccessAfter(t0 time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best time.Time
	for _, r := range l.results {
		if r.ok && !r.start.Before(t0) && (best.IsZero() || r.end.Before(best)) {
			best = r.end
		}
	}
	return best, !best.IsZero()
}

// failedBetween counts the requests started in [from, to) that failed, and all
// requests started then.
func (l *loop) failedBetween(from, to time.Time) (failed, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.results {
		if r.start.Before(from) || !r.start.Before(to) {
			continue
		}
		total++
		if !r.ok {
			failed++
		}
	}
	return failed, total
}
