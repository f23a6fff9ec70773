package kubecluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/process"
)

// Probe timing: each check gets probeTimeout; checks are probeEvery apart.
const (
	probeTimeout = 2 * time.Second
	probeEvery   = 100 * time.Millisecond
)

// waitReady calls check until it succeeds, the process exits, timeout passes or
// ctx ends. The error names the process and the last check's error.
func waitReady(ctx context.Context, p *proc, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited before it was ready: %w", p.name, err)
		}
		cctx, ccancel := context.WithTimeout(ctx, probeTimeout)
		err := check(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		if lastErr == nil || ctx.Err() == nil { // keep a real cause over the deadline's
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v: %w", p.name, timeout, lastErr)
		case <-time.After(probeEvery):
		}
	}
}

// httpClient makes a probe client that dials with dial and verifies the server
// against ca (or, with ca nil, does not verify: for self-signed serving
// certificates of probes that send no credentials).
func httpClient(dial DialFunc, ca *x509.CertPool) *http.Client {
	tc := &tls.Config{RootCAs: ca}
	if ca == nil {
		tc.InsecureSkipVerify = true
	}
	return &http.Client{Timeout: probeTimeout, Transport: &http.Transport{
		DialContext:       dial,
		TLSClientConfig:   tc,
		DisableKeepAlives: true,
	}}
}

// probe GETs url (with a bearer token when given) and returns the status and up to
// 64 KiB of the body.
func probe(ctx context.Context, hc *http.Client, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), nil
}

// checkHealth GETs a health endpoint (/readyz, /healthz) and wants 200.
func checkHealth(ctx context.Context, hc *http.Client, url, token string) error {
	code, body, err := probe(ctx, hc, url, token)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%s: %d: %s", url, code, failedChecks(body))
	}
	return err
}

// failedChecks keeps the "[-]" lines of a verbose health answer, or the whole
// (short) body when there are none.
func failedChecks(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "[-]") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return strings.TrimSpace(lastLines(body, 3))
	}
	return strings.Join(out, "; ")
}

// freePort returns a TCP port on the caller's 127.0.0.1 that was free a moment
// ago. Another process may take it before a component binds it; Start retries
// on "address already in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lastLines returns the last n lines of s, each cut to 400 bytes.
func lastLines(s string, n int) string {
	lines := strings.Split(process.LastLines(s, n), "\n")
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	return strings.Join(lines, "\n")
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
