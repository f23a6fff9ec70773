package tclb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// The test network, in namespaces of its own:
//
//	client c0 172.30.0.10, fd30::10 ── n0 172.30.0.1, fd30::1 (the node's address)
//	node   n1 10.1.0.1, fd31::1     ── p0 10.1.0.2, fd31::2  pod (a local backend)
//	node   n2 10.2.0.1, fd32::1     ── r0 10.2.0.2, fd32::2  remote (a backend on another node)
//
// The node forwards; the load balancer is on n0 and n2, the node's
// interfaces to the outside and to the other nodes.
const (
	nodeIP4   = "172.30.0.1"
	nodeIP6   = "fd30::1"
	clientIP4 = "172.30.0.10"
	clientIP6 = "fd30::10"
	podIP4    = "10.1.0.2"
	podIP6    = "fd31::2"
	remoteIP4 = "10.2.0.2"
	remoteIP6 = "fd32::2"
	lbIP4     = "172.30.0.200"
	lbIP6     = "fd30::200"
	masqMark  = "0x4000"
)

// modes are the attach modes every kernel test of both runs in.
var modes = []struct {
	name string
	m    Mode
}{{"tcx", TCX}, {"clsact", Clsact}}

type harness struct {
	client, node, pod, remote *netns.NS
	ifindexes                 []int
}

func run(t *testing.T, ns *netns.NS, args ...string) {
	t.Helper()
	out, err := ns.Command(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s in %s: %v: %s", strings.Join(args, " "), ns.Name(), err, out)
	}
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip: %v", err)
	}
	h := &harness{client: netnstest.New(t, "tclb-cl"), node: netnstest.New(t, "tclb-node"),
		pod: netnstest.New(t, "tclb-pod"), remote: netnstest.New(t, "tclb-rem")}
	// No duplicate address detection: an address is usable at once.
	for _, ns := range []*netns.NS{h.client, h.node, h.pod, h.remote} {
		run(t, ns, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0")
	}
	for _, l := range []struct {
		local, peer string
		ns          *netns.NS
		local4      string
		local6      string
		peer4       string
		peer6       string
	}{
		{"n0", "c0", h.client, nodeIP4 + "/24", nodeIP6 + "/64", clientIP4 + "/24", clientIP6 + "/64"},
		{"n1", "p0", h.pod, "10.1.0.1/24", "fd31::1/64", podIP4 + "/24", podIP6 + "/64"},
		{"n2", "r0", h.remote, "10.2.0.1/24", "fd32::1/64", remoteIP4 + "/24", remoteIP6 + "/64"},
	} {
		run(t, h.node, "ip", "link", "add", l.local, "type", "veth", "peer", "name", l.peer, "netns", l.ns.Path())
		run(t, h.node, "ip", "addr", "add", l.local4, "dev", l.local)
		run(t, h.node, "ip", "-6", "addr", "add", l.local6, "dev", l.local, "nodad")
		run(t, h.node, "ip", "link", "set", l.local, "up")
		run(t, l.ns, "ip", "addr", "add", l.peer4, "dev", l.peer)
		run(t, l.ns, "ip", "-6", "addr", "add", l.peer6, "dev", l.peer, "nodad")
		run(t, l.ns, "ip", "link", "set", l.peer, "up")
		gw4, gw6 := strings.Split(l.local4, "/")[0], strings.Split(l.local6, "/")[0]
		run(t, l.ns, "ip", "route", "add", "default", "via", gw4)
		run(t, l.ns, "ip", "-6", "route", "add", "default", "via", gw6)
	}
	run(t, h.node, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	// The node's rules masquerade what carries the mark, as the nftables
	// plane's postrouting does.
	for _, fam := range []string{"ip", "ip6"} {
		run(t, h.node, "nft", "add table "+fam+" masq; add chain "+fam+" masq post { type nat hook postrouting priority 100; }; "+
			"add rule "+fam+" masq post meta mark & "+masqMark+" != 0 masquerade")
	}
	for _, name := range []string{"n0", "n2"} {
		err := h.node.Do(func() error {
			ifc, err := net.InterfaceByName(name)
			if err == nil {
				h.ifindexes = append(h.ifindexes, ifc.Index)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// open opens a load balancer on the node's n0 and n2 with SNAT to the
// node's addresses and cfg's pod CIDRs.
func (h *harness) open(t *testing.T, mode Mode, podCIDRs ...netip.Prefix) *LB {
	t.Helper()
	var lb *LB
	err := h.node.Do(func() error {
		var err error
		lb, err = Open(Config{SNAT: []netip.Addr{netip.MustParseAddr(nodeIP4), netip.MustParseAddr(nodeIP6)},
			PodCIDRs: podCIDRs, MasqueradeMark: 0x4000}, mode, h.ifindexes...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lb.Close(); err != nil {
			t.Error(err)
		}
	})
	return lb
}

// serve answers the first line of each connection (TCP) or each datagram
// (UDP) to port on ns's addresses with "NAME PEER", PEER the address it came
// from; a connection is then closed.
func serve(t *testing.T, ns *netns.NS, name string, port int) {
	t.Helper()
	for _, network := range []string{"tcp", "udp"} {
		addr := fmt.Sprintf(":%d", port)
		if network == "tcp" {
			acceptLoop(t, ns, port, func(c net.Conn) {
				// One answer, then the server closes first, so that the
				// client's end does not wait in TIME_WAIT.
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr())
				}
			})
			continue
		}
		var pc net.PacketConn
		err := ns.Do(func() error {
			var err error
			pc, err = net.ListenPacket("udp", addr)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 1500)
			for {
				_, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				pc.WriteTo(fmt.Appendf(nil, "%s %s\n", name, from), from)
			}
		}()
	}
}

// acceptLoop accepts TCP connections to port on ns's addresses until the
// test ends, each handled by handle (for at most 20 s) and then closed.
func acceptLoop(t *testing.T, ns *netns.NS, port int, handle func(net.Conn)) {
	t.Helper()
	ln, err := netns.Listen(ns, "tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				handle(c)
			}()
		}
	}()
}

// answer is what a backend said of one request.
type answer struct {
	Server string
	Peer   netip.AddrPort // the client as the backend saw it
}

// ask connects from ns to addr over network (from source port sport when
// not 0), sends a line and reads the answer.
func ask(ns *netns.NS, network, addr string, sport int) (answer, error) {
	return askWithin(ns, network, addr, sport, 5*time.Second)
}

// askWithin is ask giving up after timeout.
func askWithin(ns *netns.NS, network, addr string, sport int, timeout time.Duration) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var c net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) })
			return serr
		}}
		if sport != 0 {
			if strings.HasPrefix(network, "tcp") {
				d.LocalAddr = &net.TCPAddr{Port: sport}
			} else {
				d.LocalAddr = &net.UDPAddr{Port: sport}
			}
		}
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return answer{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintln(c, "hello"); err != nil {
		return answer{}, err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", network, addr, err)
	}
	if strings.HasPrefix(network, "tcp") {
		// Wait for the server's end of the connection, so that this end
		// closes second (no TIME_WAIT here: the next request may reuse
		// the port). The answer is what is checked; the server's end may
		// be its close or a reset, and either leaves no TIME_WAIT here.
		if _, err := r.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
			return answer{}, fmt.Errorf("%s %s: after the answer: %v, want the server's close", network, addr, err)
		}
	}
	f := strings.Fields(line)
	if len(f) != 2 {
		return answer{}, fmt.Errorf("%s %s: answer %q", network, addr, line)
	}
	peer, err := netip.ParseAddrPort(f[1])
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: answer %q: %w", network, addr, line, err)
	}
	return answer{f[0], netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())}, nil
}
