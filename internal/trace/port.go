package trace

import (
	"fmt"
	"net/netip"
	"syscall"

	"github.com/svcnet/svcnet/internal/netns"
)

// reservedPort is a source port the sender's kernel picked and holds for the
// probe: a socket bound to the address and the port, SO_REUSEADDR, never
// listening, so the probe's own SO_REUSEADDR socket can bind the same pair
// while nothing else can.
type reservedPort struct {
	fd   int
	Port uint16
}

// Close gives the port back.
func (r *reservedPort) Close() error { return syscall.Close(r.fd) }

// reservePort asks the kernel of namespace nsName for a free ephemeral port
// of proto ("tcp" or "udp") on addr (bind to port 0, which picks from the
// namespace's ip_local_port_range a port no socket holds, TIME_WAIT ones
// included) and holds it until Close. A port the tracer picks at random can
// collide with one the sender's earlier connections left in TIME_WAIT, and
// then the probe cannot bind it.
func reservePort(nsName string, proto string, addr netip.Addr) (*reservedPort, error) {
	typ := syscall.SOCK_STREAM
	switch proto {
	case "tcp":
	case "udp":
		typ = syscall.SOCK_DGRAM
	default:
		return nil, fmt.Errorf("reserve a %s port: only tcp and udp ports are reserved", proto)
	}
	ns, err := netns.Open(nsName)
	if err != nil {
		return nil, fmt.Errorf("reserve a %s port on %s: %w", proto, addr, err)
	}
	defer ns.Close()
	var r *reservedPort
	err = ns.Do(func() error {
		var e error
		r, e = bindAny(typ, addr)
		return e
	})
	if err != nil {
		return nil, fmt.Errorf("reserve a %s port on %s in netns %s: %w", proto, addr, nsName, err)
	}
	return r, nil
}

// bindAny binds a new SO_REUSEADDR socket of type typ to addr and port 0 in
// the calling thread's namespace and returns it with the port the kernel gave.
func bindAny(typ int, addr netip.Addr) (*reservedPort, error) {
	addr = addr.Unmap()
	family := syscall.AF_INET
	var sa syscall.Sockaddr
	if addr.Is4() {
		sa = &syscall.SockaddrInet4{Addr: addr.As4()}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Addr: addr.As16()}
	}
	fd, err := syscall.Socket(family, typ|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	fail := func(op string, err error) (*reservedPort, error) {
		syscall.Close(fd)
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return fail("SO_REUSEADDR", err)
	}
	if err := syscall.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	got, err := syscall.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	switch a := got.(type) {
	case *syscall.SockaddrInet4:
		return &reservedPort{fd: fd, Port: uint16(a.Port)}, nil
	case *syscall.SockaddrInet6:
		return &reservedPort{fd: fd, Port: uint16(a.Port)}, nil
	}
	return fail("getsockname", fmt.Errorf("unexpected address %T", got))
}
