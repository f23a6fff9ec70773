package announce

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/mdlayher/packet"
	"github.com/mdlayher/socket"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Config configures an L2 announcer.
type Config struct {
	// Interface is the node-network interface to answer on, in the network
	// namespace New is called in. It must have an Ethernet address.
	Interface string
	// Logger receives an info line per gratuitous announcement, per link
	// state change and per conflicting announcement seen, and a V(2) line per
	// request answered. The zero value discards.
	Logger klog.Logger
}

// L2 answers ARP and NDP for the owned IPs on one interface and announces
// newly owned ones. It implements Announcer.
//
// Sockets. New opens, in the network namespace of the calling thread, two
// AF_PACKET sockets bound to the interface (ARP requests, and IPv6 neighbour
// solicitations, each narrowed by a BPF filter), an rtnetlink socket for the
// interface's link events, and an IPv6 socket that holds the solicited-node
// group memberships (see membership). A socket belongs to the namespace it was
// created in, so callers open an L2 inside the node's namespace
// (ns.Do(func() error { a, err = announce.New(cfg); return err })) and may
// then call Run, SetOwned and Owned from any goroutine.
//
// Solicitations are read from the AF_PACKET socket rather than from an
// ICMPv6 socket because the kernel does not consider a LoadBalancer IP local:
// it never delivers the unicast NUD probes that neighbours send to the IP
// itself (to refresh a cache entry) to an ICMPv6 socket, and would leave
// those neighbours to time the entry out.
//
// Link down and up. While the interface is down the kernel detaches the packet
// sockets and writes fail; Run keeps going (failed announcements are logged),
// and when the interface is up and running again every owned IP is announced
// afresh on the usual schedule, as it is when the interface's MAC address
// changes. If the interface is deleted (or moved to another namespace), Run
// returns ErrInterfaceGone wrapped with the interface name: the caller must
// open a new L2 when it is back. Any other socket error also ends Run.
type L2 struct {
	ifname   string
	ifindex  int
	log      klog.Logger
	arp, ndp *packet.Conn
	link     *socket.Conn
	wake     chan struct{} // tells Run's repeater the schedule changed

	mu     sync.RWMutex // guards the fields below; held while announcing
	mac    mac
	up     bool
	owned  map[netip.Addr]struct{}
	mc     *membership // nil when the kernel has no IPv6
	sched  schedule
	closed bool
	ran    bool
	seq    uint32
}

// New opens the announcer's sockets on cfg.Interface in the current network
// namespace. It starts no goroutine; Run answers requests.
func New(cfg Config) (*L2, error) {
	if cfg.Interface == "" {
		return nil, errors.New("announce: no interface given")
	}
	a := &L2{ifname: cfg.Interface, log: cfg.Logger, wake: make(chan struct{}, 1), owned: map[netip.Addr]struct{}{}}
	var closers []io.Closer
	fail := func(err error) (*L2, error) {
		for _, c := range closers {
			_ = c.Close()
		}
		return nil, fmt.Errorf("announce on %s: %w", cfg.Interface, err)
	}
	// Subscribe to link events before reading the interface's state, so no
	// change between the two is missed.
	link, err := dialLinkEvents()
	if err != nil {
		return fail(err)
	}
	closers = append(closers, link)
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return fail(err)
	}
	self, ok := macFrom(ifi.HardwareAddr)
	if !ok {
		return fail(fmt.Errorf("no ethernet address (%q)", ifi.HardwareAddr))
	}
	a.link, a.ifindex, a.mac = link, ifi.Index, self
	a.up = ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagRunning != 0
	if a.arp, err = packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, &packet.Config{Filter: arpRequestFilter}); err != nil {
		return fail(fmt.Errorf("open arp socket: %w", err))
	}
	closers = append(closers, a.arp)
	if a.ndp, err = packet.Listen(ifi, packet.Raw, unix.ETH_P_IPV6, &packet.Config{Filter: nsFilter}); err != nil {
		return fail(fmt.Errorf("open ndp socket: %w", err))
	}
	closers = append(closers, a.ndp)
	switch a.mc, err = newMembership(ifi.Index); {
	case errors.Is(err, ErrNoIPv6):
		a.log.Info("IPv6 unavailable; announcing IPv4 only", "interface", a.ifname)
	case err != nil:
		return fail(err)
	}
	return a, nil
}

// dialLinkEvents opens an rtnetlink socket subscribed to link events in the
// current network namespace.
func dialLinkEvents() (*socket.Conn, error) {
	c, err := socket.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE, "rtnetlink", nil)
	if err != nil {
		return nil, fmt.Errorf("open rtnetlink socket: %w", err)
	}
	if err := c.Bind(&unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("subscribe to link events: %w", err)
	}
	return c, nil
}

// SetOwned implements Announcer. Newly owned IPs are announced before it
// returns (the first of the repeats; Run sends the others); an IPv6 address
// also joins its solicited-node group. After Close it returns ErrClosed and
// changes nothing.
func (a *L2) SetOwned(ips []netip.Addr) error {
	next, err := normalize(ips)
	errs := []error{err}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return fmt.Errorf("announce on %s: %w", a.ifname, ErrClosed)
	}
	added, removed := diff(a.owned, next)
	for _, ip := range removed {
		delete(a.owned, ip)
		a.sched.cancel(ip)
		if ip.Is6() && a.mc != nil {
			if err := a.mc.leave(ip); err != nil {
				a.log.Error(err, "leave solicited-node group", "interface", a.ifname, "ip", ip)
			}
		}
	}
	if len(removed) > 0 {
		a.log.Info("stopped announcing", "interface", a.ifname, "ips", removed)
	}
	now := time.Now()
	for _, ip := range added {
		if ip.Is6() {
			if a.mc == nil {
				errs = append(errs, fmt.Errorf("announce %s on %s: %w", ip, a.ifname, ErrNoIPv6))
				continue
			}
			if err := a.mc.join(ip); err != nil {
				errs = append(errs, fmt.Errorf("announce %s on %s: %w", ip, a.ifname, err))
				continue
			}
		}
		a.owned[ip] = struct{}{}
		a.announceLocked(ip, 1)
		a.sched.add(ip, now, repeatOffsets, 1)
	}
	a.poke()
	return errors.Join(errs...)
}

// Owned implements Announcer. After Close it is empty.
func (a *L2) Owned() []netip.Addr {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return sortedSet(a.owned)
}

// Close closes the sockets (Run calls it on return). Afterwards nothing is
// answered or announced and SetOwned fails. Closing twice is a no-op.
func (a *L2) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	a.owned, a.sched = map[netip.Addr]struct{}{}, schedule{}
	errs := []error{a.arp.Close(), a.ndp.Close(), a.link.Close()}
	if a.mc != nil {
		errs = append(errs, a.mc.close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close announcer on %s: %w", a.ifname, err)
	}
	return nil
}

func (a *L2) isOwned(ip netip.Addr) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	_, ok := a.owned[ip]
	return ok
}

func (a *L2) currentMAC() mac {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.mac
}

// poke wakes Run's repeater without blocking.
func (a *L2) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// announceLocked sends one gratuitous announcement of ip (attempt of
// len(repeatOffsets)). The caller holds a.mu, so an IP that SetOwned removes
// is never announced afterwards. A failure is logged, not returned: the IP
// stays owned and answered, and later repeats (or the link coming back up)
// announce it again.
func (a *L2) announceLocked(ip netip.Addr, attempt int) {
	var err error
	if ip.Is4() {
		for _, p := range gratuitousARP(ip, a.mac) {
			if err = a.write(a.arp, p.encode(), p.Eth.Dst); err != nil {
				break
			}
		}
	} else {
		p := unsolicitedNA(ip, a.mac)
		err = a.write(a.ndp, p.encode(), p.Eth.Dst)
	}
	if err != nil {
		a.log.Error(err, "gratuitous announcement failed", "interface", a.ifname, "ip", ip, "attempt", attempt)
		return
	}
	a.log.Info("sent gratuitous announcement", "interface", a.ifname, "ip", ip, "mac", a.mac.String(),
		"attempt", attempt, "of", len(repeatOffsets))
}

// write sends one frame to dst through c.
func (a *L2) write(c *packet.Conn, frame []byte, dst mac) error {
	if _, err := c.WriteTo(frame, &packet.Addr{HardwareAddr: dst[:]}); err != nil {
		return fmt.Errorf("send to %s on %s: %w", dst, a.ifname, err)
	}
	return nil
}
