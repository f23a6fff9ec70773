package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// ErrName is Dialer's error for an address whose host is a name.
var ErrName = errors.New("a name, not an IP address: resolve it in the namespace first")

// Dialer returns a dial function whose connections are made from inside ns (the
// socket is created there and keeps that namespace, whatever thread uses it later),
// for clients in the host's namespace that must reach a server living only in a
// namespace: an HTTP transport's DialContext, client-go's rest.Config.Dial.
//
// The address's host must be an IP address; a name is refused with ErrName
// and no packet. Go's resolver would look it up on another thread, in the
// caller's namespace, with the caller's /etc/resolv.conf: a lookup for the
// namespace sent to the host's name servers. Resolve names where they belong
// (resolv.Config with Dial set to this dialer) and dial the addresses.
func Dialer(ns *NS) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return DialerControl(ns, nil)
}

// DialerControl is Dialer whose net.Dialer has control as its Control: it is
// called inside ns with each socket before it connects.
func DialerControl(ns *NS, control func(network, address string, c syscall.RawConn) error) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := checkIPHost(addr); err != nil {
			return nil, fmt.Errorf("dial %s %s in %s: %w", network, addr, ns.Path(), err)
		}
		var c net.Conn
		err := ns.Do(func() error {
			d := net.Dialer{Control: control}
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

// checkIPHost accepts HOST:PORT whose host is an IP address (with a zone
// for a link-local IPv6 one).
func checkIPHost(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("%q is %w", host, ErrName)
	}
	return nil
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
