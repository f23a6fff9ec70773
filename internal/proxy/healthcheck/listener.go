package healthcheck

import (
	"context"
	"net"
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
