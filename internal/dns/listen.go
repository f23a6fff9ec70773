package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// listenTries bounds the attempts to find a port free on both UDP and TCP
// when the address asks for any port.
const listenTries = 20

// listenPair opens a UDP socket and a TCP listener on the same address and
// port. With port 0 it takes the port the kernel gives the UDP socket and
// tries again (up to listenTries times) when TCP's is already taken; with a
// fixed port, any failure is returned.
func listenPair(ctx context.Context, addr string) (*net.UDPConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dns listen address %q: %w", addr, err)
	}
	var lc net.ListenConfig
	for range listenTries {
		pc, err := lc.ListenPacket(ctx, "udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns listen on udp %s: %w", addr, err)
		}
		udp := pc.(*net.UDPConn)
		p := udp.LocalAddr().(*net.UDPAddr).Port
		l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return udp, l, nil
		}
		_ = udp.Close()
		if port != "0" || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("dns listen on tcp %s: %w", net.JoinHostPort(host, strconv.Itoa(p)), err)
		}
	}
	return nil, nil, fmt.Errorf("dns listen on %s: no port free on both udp and tcp after %d tries", addr, listenTries)
}
