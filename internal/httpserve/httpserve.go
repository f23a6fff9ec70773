// Package httpserve runs svcnet's small HTTP endpoints (healthz, health
// check node ports, metrics) with one set of server settings and one
// shutdown rule, and checks such an endpoint from the client side (CheckOK).
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// ReadHeaderTimeout bounds how long a client may take to send request
// headers, so an idle connection cannot hold a server open (Slowloris).
const ReadHeaderTimeout = 10 * time.Second

// New returns a server for h with svcnet's settings.
func New(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout}
}

// Until serves srv on l until ctx ends, then closes srv and returns nil. It
// returns Serve's error if the server fails on its own first, and returns only
// after its helper goroutine has exited.
func Until(ctx context.Context, srv *http.Server, l net.Listener) error {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			_ = srv.Close()
		case <-done:
		}
	}()
	err := srv.Serve(l)
	close(done)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) && ctx.Err() != nil {
		return nil
	}
	return err
}

// checkBodyLimit bounds how much of a failed answer's body CheckOK reads
// into its error.
const checkBodyLimit = 512

// CheckOK GETs url with hc (bounded by ctx) and returns nil when the answer
// is 200 OK, else an error naming url and, for another status, the status
// and the start of the body: one poll of a health endpoint (a kubelet's
// /healthz, a Pod's readiness probe) until it is ready.
func CheckOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, checkBodyLimit))
		return fmt.Errorf("GET %s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
