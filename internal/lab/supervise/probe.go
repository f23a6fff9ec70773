package supervise

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Probe checks once whether the child serves, as one kubelet probe does.
type Probe interface {
	// Check returns nil when the child serves; it gives up after timeout.
	Check(ctx context.Context, timeout time.Duration) error
	String() string
}

// ParseProbe parses a probe: http://HOST:PORT/PATH (an httpGet probe: a
// status from 200 to 399 passes, as for the kubelet) or tcp://HOST:PORT (a
// tcpSocket probe: a connection that is accepted passes).
func ParseProbe(s string) (Probe, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("probe %q: %w", s, err)
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return nil, fmt.Errorf("probe %q: want HOST:PORT: %w", s, err)
	}
	switch u.Scheme {
	case "http":
		return httpProbe{url: u.String()}, nil
	case "tcp":
		if u.Path != "" {
			return nil, fmt.Errorf("probe %q: a tcp probe has no path", s)
		}
		return tcpProbe{addr: u.Host}, nil
	}
	return nil, fmt.Errorf("probe %q: want http://HOST:PORT/PATH or tcp://HOST:PORT", s)
}

type httpProbe struct{ url string }

func (p httpProbe) String() string { return p.url }

func (p httpProbe) Check(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return err
	}
	// A fresh connection every time, as the kubelet's prober makes one.
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return fmt.Errorf("%s: HTTP %d", p.url, resp.StatusCode)
	}
	return nil
}

type tcpProbe struct{ addr string }

func (p tcpProbe) String() string { return "tcp://" + p.addr }

func (p tcpProbe) Check(ctx context.Context, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// Threshold turns probe results into a state as the kubelet's prober worker
// does: the state changes only after Success passing results in a row (to
// true) or Failure failing ones (to false). Before the first change the state
// is unknown. Not safe for concurrent use.
type Threshold struct {
	Success, Failure int

	known, state bool
	last         bool
	run          int // results in a row equal to last
}

// Observe records one result and returns the state and whether it changed
// (from unknown, or flipped).
func (t *Threshold) Observe(ok bool) (state, changed bool) {
	if t.run > 0 && ok == t.last {
		t.run++
	} else {
		t.last, t.run = ok, 1
	}
	need := max(t.Failure, 1)
	if ok {
		need = max(t.Success, 1)
	}
	if t.run < need || (t.known && t.state == ok) {
		return t.state, false
	}
	t.known, t.state = true, ok
	return ok, true
}

// State returns the state and whether it is known yet.
func (t *Threshold) State() (state, known bool) { return t.state, t.known }

// Reset forgets the results and sets the state, as the kubelet resets a
// container's readiness when it restarts.
func (t *Threshold) Reset(state bool) {
	t.known, t.state, t.run = true, state, 0
}
