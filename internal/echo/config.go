package echo

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
)

// Config is what one echo server serves.
type Config struct {
	// Name is the pod's name; "" means $HOSTNAME, else os.Hostname.
	Name string
	// Node is the node's name (informational, may be "").
	Node string
	// PodIP is reported in the JSON reply; the zero value means the first
	// non-loopback, non-link-local interface address of the namespace Serve
	// runs in (none leaves it empty).
	PodIP netip.Addr
	// Host is the address to listen on; "" means every address (0.0.0.0 and
	// [::], one dual-stack socket when the kernel has IPv6).
	Host string
	// TCP and UDP are the ports to serve; 0 asks the kernel for a free one.
	TCP, UDP []int
	// Ready, if set, is called once every socket is open and before any is
	// served, with the bound TCP and UDP addresses in the order of TCP and UDP.
	Ready func(tcp, udp []net.Addr)
}

// withDefaults fills Name and PodIP from the environment of the calling
// thread's namespace.
func (c Config) withDefaults() (Config, error) {
	if len(c.TCP) == 0 && len(c.UDP) == 0 {
		return c, errors.New("echo: no TCP or UDP port to serve")
	}
	for _, p := range append(append([]int(nil), c.TCP...), c.UDP...) {
		if p < 0 || p > 65535 {
			return c, fmt.Errorf("echo: port %d out of range", p)
		}
	}
	if c.Name == "" {
		c.Name = os.Getenv("HOSTNAME")
	}
	if c.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("echo: pod name not given and host name unknown: %w", err)
		}
		c.Name = h
	}
	if !c.PodIP.IsValid() {
		ip, err := firstAddress()
		if err != nil {
			return c, err
		}
		c.PodIP = ip
	}
	return c, nil
}

// firstAddress returns the first non-loopback, non-link-local address of the
// calling thread's network namespace, in interface order, or the zero Addr.
func firstAddress() (netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("echo: list interface addresses: %w", err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			continue
		}
		return ip, nil
	}
	return netip.Addr{}, nil
}
