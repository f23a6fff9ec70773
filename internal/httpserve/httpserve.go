// Package httpserve runs svcnet's small HTTP endpoints (healthz, health
// check node ports, metrics) with one set of server settings and one
// shutdown rule.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
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
