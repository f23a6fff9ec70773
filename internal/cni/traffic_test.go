package cni_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/svcnet/svcnet/internal/netns"
)

// ioTimeout bounds every connection attempt and read of the traffic tests.
const ioTimeout = 3 * time.Second

// serveWho answers every TCP connection to port in ns with the client's
// address as the server sees it, and every UDP datagram likewise. It stops
// when the test ends.
func serveWho(t *testing.T, ns *netns.NS, port int) {
	t.Helper()
	l, err := netns.Listen(ns, "tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatal(err)
	}
	var pc net.PacketConn
	if err := ns.Do(func() (err error) {
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		l.Close()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(ioTimeout))
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			_, _ = fmt.Fprintln(c, host)
			c.Close()
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(from.String())
			_, _ = pc.WriteTo([]byte(host+"\n"), from)
		}
	}()
	t.Cleanup(func() { l.Close(); pc.Close(); wg.Wait() })
}

// askTCP connects from ns to addr and returns the line the server sends.
func askTCP(ns *netns.NS, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	c, err := netns.Dialer(ns)(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// askUDP sends a datagram from ns to addr and returns the answer (three
// tries, each bounded).
func askUDP(ns *netns.NS, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	c, err := netns.Dialer(ns)(ctx, "udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	buf := make([]byte, 512)
	for range 3 {
		if _, err := c.Write([]byte("who\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		n, err := c.Read(buf)
		if err == nil {
			return strings.TrimSpace(string(buf[:n])), nil
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return "", err
		}
	}
	return "", fmt.Errorf("udp %s: no answer", addr)
}

// ping sends ICMP echo requests from ns to dst until one is answered (three
// tries) and returns the TTL (hop limit) of the reply as it arrives.
func ping(ns *netns.NS, dst netip.Addr) (ttl int, err error) {
	err = ns.Do(func() error {
		network, proto, listen := "ip4:icmp", 1, "0.0.0.0"
		var reqType, replyType icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
		if dst.Is6() {
			network, proto, listen = "ip6:ipv6-icmp", 58, "::"
			reqType, replyType = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
		}
		c, err := icmp.ListenPacket(network, listen)
		if err != nil {
			return err
		}
		defer c.Close()
		if dst.Is6() {
			err = c.IPv6PacketConn().SetControlMessage(ipv6.FlagHopLimit, true)
		} else {
			err = c.IPv4PacketConn().SetControlMessage(ipv4.FlagTTL, true)
		}
		if err != nil {
			return err
		}
		id := os.Getpid() & 0xffff
		buf := make([]byte, 1500)
		for seq := 1; seq <= 3; seq++ {
			msg := icmp.Message{Type: reqType, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("svcnet")}}
			b, err := msg.Marshal(nil) // the kernel fills in the ICMPv6 checksum
			if err != nil {
				return err
			}
			if _, err := c.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
				return err
			}
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				_ = c.SetReadDeadline(deadline)
				var n, hops int
				var from net.Addr
				if dst.Is6() {
					var cm *ipv6.ControlMessage
					n, cm, from, err = c.IPv6PacketConn().ReadFrom(buf)
					if cm != nil {
						hops = cm.HopLimit
					}
				} else {
					var cm *ipv4.ControlMessage
					n, cm, from, err = c.IPv4PacketConn().ReadFrom(buf)
					if cm != nil {
						hops = cm.TTL
					}
				}
				if err != nil {
					break
				}
				m, err := icmp.ParseMessage(proto, buf[:n])
				if err != nil || m.Type != replyType {
					continue
				}
				if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq && from.String() == dst.String() {
					ttl = hops
					return nil
				}
			}
		}
		return errors.New("no echo reply")
	})
	if err != nil {
		return 0, fmt.Errorf("ping %s: %w", dst, err)
	}
	return ttl, nil
}
