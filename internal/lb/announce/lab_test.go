package announce

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// Addresses from the lab IP plan: the node network, node1 owning
// LoadBalancer IPs from the pool, the external client.
var (
	lb4, lb4Other = netip.MustParseAddr("172.26.236.180"), netip.MustParseAddr("172.26.236.181")
	lb6, lb6Other = netip.MustParseAddr("fd00:26:236::b4"), netip.MustParseAddr("fd00:26:236::b5")
)

// lab is two namespaces joined by a veth pair: the node (a0 in A, where the
// announcer runs) and a client (b0 in B) on the same link.
type lab struct {
	a, b   *netns.NS
	aMAC   mac
	bMAC   mac
	bIndex int
}

func sh(t *testing.T, ns *netns.NS, argv ...string) {
	t.Helper()
	if out, err := ns.Command(argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{a: netnstest.New(t, "annode"), b: netnstest.New(t, "ancli")}
	for _, ns := range []*netns.NS{l.a, l.b} {
		// No duplicate address detection: addresses are usable at once.
		sh(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	sh(t, l.a, "ip", "link", "add", "a0", "type", "veth", "peer", "name", "b0", "netns", l.b.Name())
	sh(t, l.a, "ip", "addr", "add", "172.26.236.177/24", "dev", "a0")
	sh(t, l.a, "ip", "-6", "addr", "add", "fd00:26:236::b1/64", "dev", "a0", "nodad")
	sh(t, l.b, "ip", "addr", "add", "172.26.236.10/24", "dev", "b0")
	sh(t, l.b, "ip", "-6", "addr", "add", "fd00:26:236::a/64", "dev", "b0", "nodad")
	sh(t, l.a, "ip", "link", "set", "a0", "up")
	sh(t, l.b, "ip", "link", "set", "b0", "up")
	// IPv6 is ready for multicast only once the kernel has seen the
	// carrier (linkwatch may take up to a second) and configured the link:
	// until then B drops the announcements to ff02::1 (no route).
	l.waitLinkLocal(t, l.a, "a0")
	l.waitLinkLocal(t, l.b, "b0")
	l.aMAC, _ = l.ifi(t, l.a, "a0")
	var bIfi *net.Interface
	l.bMAC, bIfi = l.ifi(t, l.b, "b0")
	l.bIndex = bIfi.Index
	return l
}

// waitLinkLocal waits (at most 5s) until name in ns has its IPv6 link-local
// address, which addrconf adds after the link-local and multicast routes.
func (l *lab) waitLinkLocal(t *testing.T, ns *netns.NS, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ready bool
		if err := ns.Do(func() error {
			ifi, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			addrs, err := ifi.Addrs()
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && n.IP.IsLinkLocalUnicast() && n.IP.To4() == nil {
					ready = true
				}
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no IPv6 link-local address after 5s", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (l *lab) ifi(t *testing.T, ns *netns.NS, name string) (mac, *net.Interface) {
	t.Helper()
	var ifi *net.Interface
	if err := ns.Do(func() (err error) { ifi, err = net.InterfaceByName(name); return err }); err != nil {
		t.Fatal(err)
	}
	m, ok := macFrom(ifi.HardwareAddr)
	if !ok {
		t.Fatalf("%s has no MAC", name)
	}
	return m, ifi
}

// running is an announcer opened in A and run from the test's goroutine side
// (outside any namespace), as callers do.
type running struct {
	*L2
	cancel  context.CancelFunc
	errc    chan error
	done    bool
	err     error
	wantErr error // Run's expected result, checked at cleanup
}

func (l *lab) start(t *testing.T) *running {
	t.Helper()
	var a *L2
	if err := l.a.Do(func() (err error) {
		a, err = New(Config{Interface: "a0", Logger: testr.NewWithOptions(t, testr.Options{Verbosity: 2, LogTimestamp: true})})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{L2: a, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- a.Run(ctx) }()
	t.Cleanup(func() {
		r.cancel()
		err, ok := r.wait(5 * time.Second)
		switch {
		case !ok:
			t.Errorf("Run did not return within 5s of cancel")
		case r.wantErr == nil && err != nil:
			t.Errorf("Run: %v", err)
		case r.wantErr != nil && !errors.Is(err, r.wantErr):
			t.Errorf("Run returned %v, want %v", err, r.wantErr)
		}
	})
	return r
}

// wait returns Run's result, or false if it has not returned within d.
func (r *running) wait(d time.Duration) (error, bool) {
	if r.done {
		return r.err, true
	}
	select {
	case r.err = <-r.errc:
		r.done = true
		return r.err, true
	case <-time.After(d):
		return nil, false
	}
}

// trigger makes B's kernel resolve ip: a UDP datagram to it waits in the
// neighbour queue while B solicits.
func (l *lab) trigger(t *testing.T, ip netip.Addr) {
	t.Helper()
	if err := l.b.Do(func() error {
		c, err := net.Dial("udp", netip.AddrPortFrom(ip, 9).String())
		if err != nil {
			return err
		}
		defer c.Close()
		_, _ = c.Write([]byte("resolve")) // errors (unreachable) are the point of some tests
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func family(ip netip.Addr) int {
	if ip.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// neigh returns B's neighbour entry for ip on b0.
func (l *lab) neigh(t *testing.T, ip netip.Addr) (netlink.Neigh, bool) {
	t.Helper()
	var list []netlink.Neigh
	if err := l.b.Do(func() (err error) { list, err = netlink.NeighList(l.bIndex, family(ip)); return err }); err != nil {
		t.Fatal(err)
	}
	for _, n := range list {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == ip {
			return n, true
		}
	}
	return netlink.Neigh{}, false
}

// setNeigh puts a dynamic entry ip -> hw in state into B's cache.
func (l *lab) setNeigh(t *testing.T, ip netip.Addr, hw mac, state int) {
	t.Helper()
	n := &netlink.Neigh{LinkIndex: l.bIndex, Family: family(ip), State: state, IP: ip.AsSlice(), HardwareAddr: net.HardwareAddr(hw[:])}
	if err := l.b.Do(func() error { return netlink.NeighSet(n) }); err != nil {
		t.Fatalf("set neighbour %s: %v", ip, err)
	}
}

func (l *lab) delNeigh(t *testing.T, ip netip.Addr) {
	t.Helper()
	n := &netlink.Neigh{LinkIndex: l.bIndex, Family: family(ip), IP: ip.AsSlice()}
	if err := l.b.Do(func() error { return netlink.NeighDel(n) }); err != nil && !errors.Is(err, unix.ENOENT) {
		t.Fatalf("delete neighbour %s: %v", ip, err)
	}
}

const validStates = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE

func hasMAC(n netlink.Neigh, m mac) bool {
	return n.State&validStates != 0 && bytes.Equal(n.HardwareAddr, m[:])
}

// waitNeigh polls B's entry for ip until cond holds or timeout passes; it
// returns the last entry seen and how long it took.
func (l *lab) waitNeigh(t *testing.T, ip netip.Addr, timeout time.Duration, cond func(netlink.Neigh) bool) (netlink.Neigh, time.Duration, bool) {
	t.Helper()
	start := time.Now()
	for {
		n, _ := l.neigh(t, ip)
		if cond(n) {
			return n, time.Since(start), true
		}
		if time.Since(start) > timeout {
			return n, time.Since(start), false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// assertUnresolved checks for d that B never learns a MAC for ip, and that it
// ends up with an entry that is still resolving or failed.
func (l *lab) assertUnresolved(t *testing.T, ip netip.Addr, d time.Duration) {
	t.Helper()
	n, _, resolved := l.waitNeigh(t, ip, d, func(n netlink.Neigh) bool { return n.State&validStates != 0 || len(n.HardwareAddr) > 0 })
	if resolved {
		t.Errorf("%s resolved to %s (state %s); nobody should answer for it", ip, n.HardwareAddr, neighState(n.State))
		return
	}
	if n.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED) == 0 {
		t.Errorf("%s: entry state %s, want INCOMPLETE or FAILED", ip, neighState(n.State))
	}
}

func neighState(s int) string {
	names := map[int]string{netlink.NUD_INCOMPLETE: "INCOMPLETE", netlink.NUD_REACHABLE: "REACHABLE", netlink.NUD_STALE: "STALE",
		netlink.NUD_DELAY: "DELAY", netlink.NUD_PROBE: "PROBE", netlink.NUD_FAILED: "FAILED", netlink.NUD_NOARP: "NOARP", netlink.NUD_PERMANENT: "PERMANENT"}
	var out []string
	for bit, name := range names {
		if s&bit != 0 {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return "NONE"
	}
	return strings.Join(out, "|")
}

// capture records the ARP and NDP frames on b0 (in and out) until the given
// time; the returned function waits for that time and returns them.
func (l *lab) capture(t *testing.T, until time.Time) func() []frameSeen {
	t.Helper()
	var c *packet.Conn
	if err := l.b.Do(func() error {
		ifi, err := net.InterfaceByName("b0")
		if err != nil {
			return err
		}
		c, err = packet.Listen(ifi, packet.Raw, unix.ETH_P_ALL, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(until); err != nil {
		t.Fatal(err)
	}
	type result struct {
		frames []frameSeen
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		buf := make([]byte, 1<<16)
		for range 10000 { // bounded: a quiet veth carries far fewer frames
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					res.err = err
				}
				break
			}
			if f, ok := classify(buf[:n]); ok {
				f.At = time.Now()
				res.frames = append(res.frames, f)
			}
		}
		done <- res
	}()
	var once sync.Once
	var res result
	wait := func() {
		once.Do(func() {
			res = <-done
			c.Close()
		})
	}
	t.Cleanup(func() {
		_ = c.SetReadDeadline(time.Now()) // a test that failed early does not wait
		wait()
	})
	return func() []frameSeen {
		wait()
		if res.err != nil {
			t.Errorf("capture: %v", res.err)
		}
		return res.frames
	}
}

// frameSeen is one ARP or NDP frame read from a capture.
type frameSeen struct {
	At       time.Time
	Kind     string // "garp-request", "garp-reply", "arp-request", "unsolicited-na", "solicited-na", "ns"
	IP       netip.Addr
	From     mac // Ethernet source
	To       mac // Ethernet destination
	Announce mac // SHA or target link-layer address
}

func classify(frame []byte) (frameSeen, bool) {
	if p, err := decodeARP(frame); err == nil {
		f := frameSeen{IP: p.TPA, From: p.Eth.Src, To: p.Eth.Dst, Announce: p.SHA}
		switch {
		case p.SPA == p.TPA && p.Op == arpOpRequest:
			f.Kind = "garp-request"
		case p.SPA == p.TPA && p.Op == arpOpReply:
			f.Kind = "garp-reply"
		case p.Op == arpOpRequest:
			f.Kind = "arp-request"
		default:
			return f, false
		}
		return f, true
	}
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if eth == nil {
		return frameSeen{}, false
	}
	f := frameSeen{}
	f.From, _ = macFrom(eth.SrcMAC)
	f.To, _ = macFrom(eth.DstMAC)
	if na, _ := pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); na != nil {
		f.IP, _ = netip.AddrFromSlice(na.TargetAddress)
		f.Kind = "solicited-na"
		if !na.Solicited() {
			f.Kind = "unsolicited-na"
		}
		for _, o := range na.Options {
			if o.Type == layers.ICMPv6OptTargetAddress {
				f.Announce, _ = macFrom(o.Data)
			}
		}
		return f, true
	}
	if ns, _ := pkt.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation); ns != nil {
		f.IP, _ = netip.AddrFromSlice(ns.TargetAddress)
		f.Kind = "ns"
		return f, true
	}
	return frameSeen{}, false
}

// igmp6Has reports whether A's interface a0 is in ip's solicited-node group.
func (l *lab) igmp6Has(t *testing.T, ip netip.Addr) bool {
	t.Helper()
	out, err := l.a.Command("cat", "/proc/net/igmp6").CombinedOutput()
	if err != nil {
		t.Fatalf("read igmp6: %v: %s", err, out)
	}
	g := solicitedNode(ip).As16()
	want := hex.EncodeToString(g[:])
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "a0" && f[2] == want {
			return true
		}
	}
	return false
}
