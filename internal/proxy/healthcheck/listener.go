package healthcheck

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Listener opens the sockets the health servers serve on. Network is "tcp",
// "tcp4" or "tcp6"; address is host:port as for net.Listen.
type Listener interface {
	Listen(ctx context.Context, network, address string) (net.Listener, error)
}

// StdListener is the Listener for production: net.ListenConfig.Listen.
type StdListener struct{}

// Listen implements Listener.
func (StdListener) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, network, address)
}

var _ Listener = StdListener{}

// readHeaderTimeout bounds how long a client may take to send request headers,
// so a stuck prober cannot hold a connection (and a goroutine) forever.
const readHeaderTimeout = 10 * time.Second

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout}
}

// serveUntil serves srv on l until ctx ends, then closes srv and returns nil.
// It returns Serve's error if the server fails on its own first. It returns
// only after its helper goroutine has exited.
func serveUntil(ctx context.Context, srv *http.Server, l net.Listener) error {
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
