package nftrace

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// run runs argv inside ns and fails the test on error.
func run(t *testing.T, ns *netns.NS, argv ...string) string {
	t.Helper()
	out, err := ns.Command(argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// nftLoad programs ruleset text into ns with `nft -f -`.
func nftLoad(t *testing.T, ns *netns.NS, text string) {
	t.Helper()
	cmd := ns.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v\n%s\n%s", err, out, text)
	}
}

// svcTable is a small svcnet-shaped table for the node namespace: Service
// 10.96.0.10 tcp/80 and udp/53 DNATed (nat prerouting and output, through a
// verdict map) to endpoints on the node's own address, and an input filter
// chain that jumps to a regular chain whose rule does not match, sets a mark
// (a rule without verdict), jumps through a verdict map to a chain that counts
// and returns, and accepts explicitly.
const svcTable = `
table ip svc {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.10 . tcp . 80 : jump svc-web, 10.96.0.10 . udp . 53 : jump svc-dns }
	}
	map endpoint-ports {
		type inet_proto . inet_service : verdict
		elements = { tcp . 8080 : jump ep-web }
	}
	chain nat-prerouting {
		type nat hook prerouting priority -100; policy accept;
		jump services
	}
	chain nat-output {
		type nat hook output priority -100; policy accept;
		jump services
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
	chain svc-web {
		meta l4proto tcp dnat to 10.200.0.2:8080
	}
	chain svc-dns {
		meta l4proto udp dnat to 10.200.0.2:5353
	}
	chain filter-input {
		type filter hook input priority 0; policy accept;
		jump checks
		meta mark set 0x4000
		meta l4proto . th dport vmap @endpoint-ports
		accept
	}
	chain checks {
		ip saddr 192.0.2.1 drop
	}
	chain ep-web {
		counter
		return
	}
}
`

// lab is a client namespace and a node namespace joined by a veth pair
// (client c0 10.200.0.1, node n0 10.200.0.2); the client routes the Service
// range to the node, the node carries svcTable and serves tcp 8080 and udp
// 5353 on its address.
type lab struct {
	cli, node *netns.NS
	udp       net.PacketConn // the node's udp 10.200.0.2:5353
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{cli: netnstest.New(t, "trcli"), node: netnstest.New(t, "trnode")}
	run(t, l.cli, "ip", "link", "add", "c0", "type", "veth", "peer", "name", "n0", "netns", l.node.Name())
	run(t, l.cli, "ip", "addr", "add", "10.200.0.1/24", "dev", "c0")
	run(t, l.cli, "ip", "link", "set", "c0", "up")
	run(t, l.cli, "ip", "route", "add", "10.96.0.0/12", "via", "10.200.0.2")
	run(t, l.node, "ip", "addr", "add", "10.200.0.2/24", "dev", "n0")
	run(t, l.node, "ip", "link", "set", "n0", "up")
	run(t, l.node, "ip", "route", "add", "10.96.0.0/12", "via", "10.200.0.1")
	nftLoad(t, l.node, svcTable)
	serveTCP(t, l.node, "10.200.0.2:8080")
	if err := l.node.Do(func() (err error) {
		l.udp, err = net.ListenPacket("udp", "10.200.0.2:5353")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.udp.Close() })
	return l
}

// serveTCP accepts and closes connections on addr inside ns until the test ends.
func serveTCP(t *testing.T, ns *netns.NS, addr string) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // listener closed
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
}

// connect makes one TCP connection from inside ns to addr and closes it.
func connect(t *testing.T, ns *netns.NS, addr string) netip.AddrPort {
	t.Helper()
	var local netip.AddrPort
	if err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		local = c.LocalAddr().(*net.TCPAddr).AddrPort()
		return nil
	}); err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	return local
}

// sendUDP sends one datagram from inside ns to addr and returns its source.
func sendUDP(t *testing.T, ns *netns.NS, addr string) netip.AddrPort {
	t.Helper()
	var local netip.AddrPort
	if err := ns.Do(func() error {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		local = c.LocalAddr().(*net.UDPAddr).AddrPort()
		_, err = c.Write([]byte("probe"))
		return err
	}); err != nil {
		t.Fatalf("send udp to %s: %v", addr, err)
	}
	return local
}

// listen subscribes to ns's trace events until the test ends.
func listen(t *testing.T, ns *netns.NS) *Listener {
	t.Helper()
	l, err := Listen(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// arm arms ns until the test ends.
func arm(t *testing.T, ns *netns.NS, table string, ms ...Match) *Armed {
	t.Helper()
	a, err := Arm(ns, table, ms)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("close armed: %v", err)
		}
	})
	return a
}

// collect collects events for at most 5 s, ending after 300 ms of quiet.
func collect(t *testing.T, l *Listener) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	evs, err := l.Collect(ctx, 300*time.Millisecond, 0)
	if err != nil {
		t.Fatalf("collect: %v (after %d events)", err, len(evs))
	}
	return evs
}
