//go:build linux

package conntrack_test

// Kernel tier: real conntrack entries made by real DNAT in a throwaway
// namespace. The "node" is one namespace whose loopback holds the backend
// and client addresses; an nft output-hook nat chain plays the service proxy.

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// node is the addressing of one family's test namespace.
type node struct {
	fam          ipfamily.Family
	nft          string // nft family and address keyword: "ip" or "ip6"
	self         netip.Addr
	b1, b2, b3   netip.Addr // backend addresses
	svcA, svcB   netip.Addr // ClusterIPs
	svcSCTP      netip.Addr
	addrs, route []string // `ip addr add` prefixes on lo, `ip route add` prefix to lo
}

var families = []node{{
	fam: ipfamily.IPv4, nft: "ip",
	self: mustAddr("10.0.0.100"), b1: mustAddr("10.0.0.1"), b2: mustAddr("10.0.0.2"), b3: mustAddr("10.0.0.3"),
	svcA: mustAddr("10.96.0.10"), svcB: mustAddr("10.96.0.11"), svcSCTP: mustAddr("10.96.0.30"),
	addrs: []string{"10.0.0.100/32", "10.0.0.1/32", "10.0.0.2/32", "10.0.0.3/32"},
	route: []string{"10.96.0.0/12"},
}, {
	fam: ipfamily.IPv6, nft: "ip6",
	self: mustAddr("fd00::100"), b1: mustAddr("fd00::1"), b2: mustAddr("fd00::2"), b3: mustAddr("fd00::3"),
	svcA: mustAddr("fd00:96::a"), svcB: mustAddr("fd00:96::b"), svcSCTP: mustAddr("fd00:96::1e"),
	addrs: []string{"fd00::100/128", "fd00::1/128", "fd00::2/128", "fd00::3/128"},
	route: []string{"fd00:96::/108"},
}}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

const (
	dnsPort  = 53
	podPort  = 5353
	nodePort = 30053
	sctpPort = 3868
)

// setup creates the namespace with addresses, the service route, a long SCTP
// COOKIE_WAIT timeout (default 3 s) and the nat table sending service A and
// the NodePort to backend aBackend.
func setup(t *testing.T, n node, aBackend netip.Addr) *netns.NS {
	t.Helper()
	ns := netnstest.New(t, "conntrack")
	for _, a := range n.addrs {
		run(t, ns, "ip", "addr", "add", a, "dev", "lo", "nodad")
	}
	for _, r := range n.route {
		run(t, ns, "ip", "route", "add", r, "dev", "lo")
	}
	run(t, ns, "sysctl", "-q", "-w", "net.netfilter.nf_conntrack_sctp_timeout_cookie_wait=120")
	program(t, ns, n, aBackend)
	return ns
}

// program (re)writes the nat table in one nft transaction: service A and
// the NodePort go to aBackend, service B to b3, the SCTP service to b1.
func program(t *testing.T, ns *netns.NS, n node, aBackend netip.Addr) {
	t.Helper()
	hp := func(a netip.Addr, port int) string { return netip.AddrPortFrom(a, uint16(port)).String() }
	rules := fmt.Sprintf(`table %[1]s svctest {}
delete table %[1]s svctest
table %[1]s svctest {
	chain out {
		type nat hook output priority -100; policy accept;
		%[1]s daddr %[2]s udp dport %[3]d dnat to %[4]s
		%[1]s daddr %[5]s udp dport %[3]d dnat to %[6]s
		%[1]s daddr %[7]s udp dport %[8]d dnat to %[4]s
		%[1]s daddr %[9]s sctp dport %[10]d dnat to %[11]s
	}
}
`, n.nft, n.svcA, dnsPort, hp(aBackend, podPort), n.svcB, hp(n.b3, podPort),
		n.self, nodePort, n.svcSCTP, sctpPort, hp(n.b1, sctpPort))
	cmd := ns.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s\n%s", err, out, rules)
	}
}

func run(t *testing.T, ns *netns.NS, argv ...string) {
	t.Helper()
	if out, err := ns.Command(argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

// echo serves UDP on addr inside ns, answering every datagram with name,
// until the test ends.
func echo(t *testing.T, ns *netns.NS, addr netip.AddrPort, name string) {
	t.Helper()
	conn := listenUDP(t, ns, addr)
	done := make(chan struct{})
	stop := context.AfterFunc(t.Context(), func() { conn.Close() })
	t.Cleanup(func() {
		stop()
		conn.Close()
		<-done
	})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			_, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed
			}
			_, _ = conn.WriteToUDPAddrPort([]byte(name), from)
		}
	}()
}

// listenUDP opens a UDP socket in ns; it stays in ns wherever it is used.
func listenUDP(t *testing.T, ns *netns.NS, addr netip.AddrPort) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	if err := ns.Do(func() (err error) {
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		return err
	}); err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// ask sends a query from c to dst and returns the name of the backend that
// answered, retrying a few times with a short deadline each.
func ask(t *testing.T, c *net.UDPConn, dst netip.AddrPort) string {
	t.Helper()
	buf := make([]byte, 64)
	var lastErr error
	for range 5 {
		if _, err := c.WriteToUDPAddrPort([]byte("q"), dst); err != nil {
			lastErr = err
			continue
		}
		if err := c.SetReadDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			lastErr = err
			continue
		}
		if from.Addr().Unmap() != dst.Addr() || from.Port() != dst.Port() {
			t.Fatalf("answer to %s came from %s: reverse NAT missing", dst, from)
		}
		return string(buf[:n])
	}
	t.Fatalf("no answer from %s: %v", dst, lastErr)
	return ""
}

// flowFrom returns the flow whose original source is src, if any.
func flowFrom(t *testing.T, table conntrack.Table, fam ipfamily.Family, proto uint8, src netip.AddrPort) (conntrack.Flow, bool) {
	t.Helper()
	flows, err := table.List(fam)
	if err != nil {
		t.Fatalf("List(%s): %v", fam, err)
	}
	for _, f := range flows {
		if f.Proto == proto && f.OrigSrc == src {
			return f, true
		}
	}
	return conntrack.Flow{}, false
}

func wantReplySrc(t *testing.T, table conntrack.Table, fam ipfamily.Family, c *net.UDPConn, backend netip.AddrPort) {
	t.Helper()
	src := c.LocalAddr().(*net.UDPAddr).AddrPort()
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	f, ok := flowFrom(t, table, fam, conntrack.ProtoUDP, src)
	switch {
	case !ok:
		t.Errorf("no conntrack flow from %s, want one DNATed to %s", src, backend)
	case f.ReplySrc != backend || f.ID == 0:
		t.Errorf("flow %s (id %d): want reply source %s and an ID", f, f.ID, backend)
	}
}

func TestNetlinkCleanupUDP(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, n := range families {
		t.Run(n.fam.String(), func(t *testing.T) {
			ns := setup(t, n, n.b1)
			ap := func(a netip.Addr, port int) netip.AddrPort { return netip.AddrPortFrom(a, uint16(port)) }
			b1, b2, b3 := ap(n.b1, podPort), ap(n.b2, podPort), ap(n.b3, podPort)
			echo(t, ns, b1, "b1")
			echo(t, ns, b2, "b2")
			echo(t, ns, b3, "b3")
			svcA, svcB, np := ap(n.svcA, dnsPort), ap(n.svcB, dnsPort), ap(n.self, nodePort)
			cA := listenUDP(t, ns, ap(n.self, 0))
			cB := listenUDP(t, ns, ap(n.self, 0))
			cNP := listenUDP(t, ns, ap(n.self, 0))

			table, err := conntrack.NewNetlinkIn(ns)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { table.Close() })

			for _, q := range []struct {
				c    *net.UDPConn
				dst  netip.AddrPort
				want string
			}{{cA, svcA, "b1"}, {cB, svcB, "b3"}, {cNP, np, "b1"}} {
				if got := ask(t, q.c, q.dst); got != q.want {
					t.Fatalf("%s answered by %s, want %s", q.dst, got, q.want)
				}
			}
			wantReplySrc(t, table, n.fam, cA, b1)
			wantReplySrc(t, table, n.fam, cB, b3)
			wantReplySrc(t, table, n.fam, cNP, b1)

			// The service moves from b1 to b2. The clients' flows keep the
			// old DNAT: this is the bug cleanup exists for.
			program(t, ns, n, n.b2)
			if got := ask(t, cA, svcA); got != "b1" {
				t.Fatalf("after the rule change, without cleanup, %s answered by %s; want the stale b1", svcA, got)
			}
			if got := ask(t, cNP, np); got != "b1" {
				t.Fatalf("after the rule change, without cleanup, %s answered by %s; want the stale b1", np, got)
			}

			want := conntrack.Want{}
			want.Add(conntrack.Frontend{Proto: conntrack.ProtoUDP, Addr: n.svcA, Port: dnsPort}, b2)
			want.Add(conntrack.Frontend{Proto: conntrack.ProtoUDP, Addr: n.svcB, Port: dnsPort}, b3)
			want.Add(conntrack.Frontend{Proto: conntrack.ProtoUDP, Port: nodePort}, b2)
			deleted, err := conntrack.Cleanup(t.Context(), table, want)
			if err != nil || deleted != 2 {
				t.Fatalf("Cleanup = %d, %v; want 2 (service A and NodePort flows), nil", deleted, err)
			}
			srcA := cA.LocalAddr().(*net.UDPAddr).AddrPort()
			if f, ok := flowFrom(t, table, n.fam, conntrack.ProtoUDP, srcA); ok {
				t.Errorf("stale flow survived Cleanup: %s", f)
			}
			wantReplySrc(t, table, n.fam, cB, b3) // still valid: untouched

			// Same client sockets, same source ports: now they reach b2.
			if got := ask(t, cA, svcA); got != "b2" {
				t.Errorf("after cleanup %s answered by %s, want b2", svcA, got)
			}
			if got := ask(t, cNP, np); got != "b2" {
				t.Errorf("after cleanup %s answered by %s, want b2", np, got)
			}
			if got := ask(t, cB, svcB); got != "b3" {
				t.Errorf("after cleanup %s answered by %s, want b3", svcB, got)
			}
			wantReplySrc(t, table, n.fam, cA, b2)

			if deleted, err := conntrack.Cleanup(t.Context(), table, want); deleted != 0 || err != nil {
				t.Errorf("second Cleanup = %d, %v; want 0, nil", deleted, err)
			}
		})
	}
}

func TestNetlinkCleanupSCTP(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, n := range families {
		t.Run(n.fam.String(), func(t *testing.T) {
			ns := setup(t, n, n.b1)
			table, err := conntrack.NewNetlinkIn(ns)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { table.Close() })

			// Two associations to the SCTP service, DNATed to b1; the
			// kernel here has conntrack for SCTP but no SCTP sockets, so
			// the INIT chunks are sent through a raw socket.
			src1, src2 := netip.AddrPortFrom(n.self, 5001), netip.AddrPortFrom(n.self, 5002)
			dst := netip.AddrPortFrom(n.svcSCTP, sctpPort)
			sendSCTPInit(t, ns, src1, dst)
			sendSCTPInit(t, ns, src2, dst)
			b1 := netip.AddrPortFrom(n.b1, sctpPort)
			for _, src := range []netip.AddrPort{src1, src2} {
				f, ok := flowFrom(t, table, n.fam, conntrack.ProtoSCTP, src)
				if !ok || f.OrigDst != dst || f.ReplySrc != b1 {
					t.Fatalf("SCTP flow from %s = %s (found %v), want to %s DNATed to %s", src, f, ok, dst, b1)
				}
			}

			// b1 still serves: nothing to do.
			want := conntrack.Want{}
			want.Add(conntrack.Frontend{Proto: conntrack.ProtoSCTP, Addr: n.svcSCTP, Port: sctpPort}, b1)
			if deleted, err := conntrack.Cleanup(t.Context(), table, want); deleted != 0 || err != nil {
				t.Fatalf("Cleanup with b1 serving = %d, %v; want 0, nil", deleted, err)
			}
			// b1 is gone, b2 serves: both associations are stale.
			want = conntrack.Want{}
			want.Add(conntrack.Frontend{Proto: conntrack.ProtoSCTP, Addr: n.svcSCTP, Port: sctpPort}, netip.AddrPortFrom(n.b2, sctpPort))
			if deleted, err := conntrack.Cleanup(t.Context(), table, want); deleted != 2 || err != nil {
				t.Fatalf("Cleanup = %d, %v; want 2, nil", deleted, err)
			}
			for _, src := range []netip.AddrPort{src1, src2} {
				if f, ok := flowFrom(t, table, n.fam, conntrack.ProtoSCTP, src); ok {
					t.Errorf("stale SCTP flow survived: %s", f)
				}
			}
		})
	}
}

func TestNetlinkDeleteChecksID(t *testing.T) {
	netnstest.RequireRoot(t)
	n := families[0]
	ns := setup(t, n, n.b1)
	table, err := conntrack.NewNetlinkIn(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { table.Close() })
	echo(t, ns, netip.AddrPortFrom(n.b1, podPort), "b1")
	c := listenUDP(t, ns, netip.AddrPortFrom(n.self, 0))
	ask(t, c, netip.AddrPortFrom(n.svcA, dnsPort))
	src := c.LocalAddr().(*net.UDPAddr).AddrPort()
	f, ok := flowFrom(t, table, n.fam, conntrack.ProtoUDP, src)
	if !ok {
		t.Fatalf("no flow from %s", src)
	}

	// A flow with the right tuple but another ID is a different entry.
	other := f
	other.ID++
	if deleted, err := table.Delete(n.fam, []conntrack.Flow{other}); deleted != 0 || err != nil {
		t.Fatalf("Delete with a wrong ID = %d, %v; want 0, nil", deleted, err)
	}
	if _, ok := flowFrom(t, table, n.fam, conntrack.ProtoUDP, src); !ok {
		t.Fatal("Delete with a wrong ID removed the flow")
	}
	if deleted, err := table.Delete(n.fam, []conntrack.Flow{f}); deleted != 1 || err != nil {
		t.Fatalf("Delete = %d, %v; want 1, nil", deleted, err)
	}
	// Gone already: not an error.
	if deleted, err := table.Delete(n.fam, []conntrack.Flow{f}); deleted != 0 || err != nil {
		t.Fatalf("second Delete = %d, %v; want 0, nil", deleted, err)
	}
	// A flow of the other family is refused, not sent.
	if _, err := table.Delete(ipfamily.IPv6, []conntrack.Flow{f}); err == nil {
		t.Error("Delete of an IPv4 flow as IPv6 succeeded")
	}
}

func TestNetlinkZone(t *testing.T) {
	netnstest.RequireRoot(t)
	n := families[0]
	ns := setup(t, n, n.b1)
	// Flows to service B (and b3's answers) are tracked in conntrack zone 5.
	cmd := ns.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(fmt.Sprintf(`table ip zonetest {
	chain raw {
		type filter hook output priority raw; policy accept;
		ip daddr %s ct zone set 5
		ip saddr %s udp sport %d ct zone set 5
	}
}
`, n.svcB, n.b3, podPort))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	table, err := conntrack.NewNetlinkIn(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { table.Close() })
	b3 := netip.AddrPortFrom(n.b3, podPort)
	echo(t, ns, b3, "b3")
	c := listenUDP(t, ns, netip.AddrPortFrom(n.self, 0))
	ask(t, c, netip.AddrPortFrom(n.svcB, dnsPort))
	src := c.LocalAddr().(*net.UDPAddr).AddrPort()
	f, ok := flowFrom(t, table, n.fam, conntrack.ProtoUDP, src)
	if !ok || f.Zone != 5 || f.ReplySrc != b3 {
		t.Fatalf("flow from %s = %s (found %v), want zone 5 DNATed to %s", src, f, ok, b3)
	}
	want := conntrack.Want{}
	want.Add(conntrack.Frontend{Proto: conntrack.ProtoUDP, Addr: n.svcB, Port: dnsPort}, netip.AddrPortFrom(n.b2, podPort))
	if deleted, err := conntrack.Cleanup(t.Context(), table, want); deleted != 1 || err != nil {
		t.Fatalf("Cleanup = %d, %v; want 1, nil", deleted, err)
	}
	if f, ok := flowFrom(t, table, n.fam, conntrack.ProtoUDP, src); ok {
		t.Errorf("stale zoned flow survived: %s", f)
	}
}

func TestNetlinkStaysInItsNamespace(t *testing.T) {
	netnstest.RequireRoot(t)
	n := families[0]
	nsA := setup(t, n, n.b1)
	nsB := setup(t, n, n.b1)
	echo(t, nsA, netip.AddrPortFrom(n.b1, podPort), "b1")
	c := listenUDP(t, nsA, netip.AddrPortFrom(n.self, 0))
	ask(t, c, netip.AddrPortFrom(n.svcA, dnsPort))
	src := c.LocalAddr().(*net.UDPAddr).AddrPort()

	tableA, err := conntrack.NewNetlinkIn(nsA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tableA.Close() })
	tableB, err := conntrack.NewNetlinkIn(nsB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tableB.Close() })
	if _, ok := flowFrom(t, tableA, n.fam, conntrack.ProtoUDP, src); !ok {
		t.Fatalf("no flow from %s in its namespace", src)
	}
	if f, ok := flowFrom(t, tableB, n.fam, conntrack.ProtoUDP, src); ok {
		t.Fatalf("flow %s of namespace A seen from namespace B", f)
	}
}

// sendSCTPInit sends one SCTP INIT chunk from src to dst through a raw
// socket in ns: enough for conntrack to track (and DNAT) a new association.
func sendSCTPInit(t *testing.T, ns *netns.NS, src, dst netip.AddrPort) {
	t.Helper()
	pkt := make([]byte, 12+20)
	binary.BigEndian.PutUint16(pkt[0:], src.Port())
	binary.BigEndian.PutUint16(pkt[2:], dst.Port())
	// verification tag 0 (INIT), checksum later
	init := pkt[12:]
	init[0] = 1                                  // chunk type INIT
	binary.BigEndian.PutUint16(init[2:], 20)     // chunk length
	binary.BigEndian.PutUint32(init[4:], 0x1234) // initiate tag
	binary.BigEndian.PutUint32(init[8:], 65535)  // a_rwnd
	binary.BigEndian.PutUint16(init[12:], 1)     // outbound streams
	binary.BigEndian.PutUint16(init[14:], 1)     // inbound streams
	binary.BigEndian.PutUint32(init[16:], 1)     // initial TSN
	binary.LittleEndian.PutUint32(pkt[8:], crc32.Checksum(pkt, crc32.MakeTable(crc32.Castagnoli)))

	af, from, to := sockaddrs(src, dst)
	err := ns.Do(func() error {
		fd, err := unix.Socket(af, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, from); err != nil {
			return fmt.Errorf("bind %s: %w", src.Addr(), err)
		}
		return unix.Sendto(fd, pkt, 0, to)
	})
	if err != nil {
		t.Fatalf("send SCTP INIT %s -> %s: %v", src, dst, err)
	}
}

func sockaddrs(src, dst netip.AddrPort) (int, unix.Sockaddr, unix.Sockaddr) {
	if src.Addr().Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Addr: src.Addr().As4()}, &unix.SockaddrInet4{Addr: dst.Addr().As4()}
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Addr: src.Addr().As16()}, &unix.SockaddrInet6{Addr: dst.Addr().As16()}
}
