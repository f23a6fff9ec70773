package netns

import (
	"context"
	"fmt"
	"net"
)

// Dialer returns a dial function whose connections are made from inside ns (the
// socket is created there and keeps that namespace, whatever thread uses it later),
// for clients in the host's namespace that must reach a server living only in a
// namespace: an HTTP transport's DialContext, client-go's rest.Config.Dial.
func Dialer(ns *NS) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("dial %s %s in %s: %w", network, addr, ns.Path(), err)
		}
		return c, nil
	}
}

// Listen opens a listener inside ns (for a server whose clients live there).
func Listen(ns *NS, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := ns.Do(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen %s %s in %s: %w", network, addr, ns.Path(), err)
	}
	return l, nil
}
