package netnstest

import (
	"net"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
)

// ClosingServer listens on addr in ns and closes every connection it
// accepts, until the test ends: the far end of a connect benchmark, where
// only the handshake counts. It returns the listener, for its address.
func ClosingServer(tb testing.TB, ns *netns.NS, network, addr string) net.Listener {
	tb.Helper()
	ln, err := netns.Listen(ns, network, addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}
