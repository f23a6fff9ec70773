package echo

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// serveUDP answers every datagram on c (Datagram) from c itself until c closes.
// The socket is bound to the wildcard address, so whoami names the pod's
// address with the port as the address a datagram arrived on.
func (s *server) serveUDP(ctx context.Context, c net.PacketConn) error {
	buf := make([]byte, 64<<10)
	server := ""
	if ua, ok := c.LocalAddr().(*net.UDPAddr); ok && addrString(s.cfg) != "" {
		server = net.JoinHostPort(addrString(s.cfg), strconv.Itoa(ua.Port))
	}
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("echo: read udp on %s: %w", c.LocalAddr(), err)
		}
		s.log.V(1).Info("connection", "proto", "udp", "client", from.String(), "server", c.LocalAddr().String())
		reply := Datagram(buf[:n], Peer{Name: s.cfg.Name, Client: from.String(), Node: s.cfg.Node, PodIP: addrString(s.cfg), Server: server})
		if _, err := c.WriteTo(reply, from); err != nil {
			// One unanswerable client (no route back, say) must not stop the port.
			s.log.V(1).Info("udp reply failed", "client", from.String(), "err", err)
		}
	}
}
