package trace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestReservedPortAvoidsTimeWait (kernel tier): a source port that an earlier
// connection of the sender left in TIME_WAIT cannot be bound by the probe,
// even with SO_REUSEADDR (the earlier socket did not set it): the flake that
// failed TraceVerify when the tracer picked the port at random. The port the
// sender's kernel reserves is never that one, and the probe binds the
// reserved port beside the reservation, for TCP and UDP.
func TestReservedPortAvoidsTimeWait(t *testing.T) {
	ns := netnstest.New(t, "port")
	lo := netip.MustParseAddr("127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	low := 40000 // the netns's ephemeral ports: low and low+1
	var tcpL net.Listener
	var udpC net.PacketConn
	err := ns.Do(func() error {
		var err error
		if tcpL, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
		if udpC, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return err
		}
		// Two ephemeral ports only, so the kernel's choice is checked, not
		// lucky; neither is a listener's.
		held := []int{tcpL.Addr().(*net.TCPAddr).Port, udpC.LocalAddr().(*net.UDPAddr).Port}
		for slices.Contains(held, low) || slices.Contains(held, low+1) {
			low += 2
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte(fmt.Sprintf("%d %d", low, low+1)), 0o644); err != nil {
			return err
		}
		// An earlier connection from port low, closed by the client first:
		// its socket stays in TIME_WAIT.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: low}}
		c, err := d.DialContext(ctx, "tcp", tcpL.Addr().String())
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		t.Fatalf("set up netns %s: %v", ns.Name(), err)
	}
	defer tcpL.Close()
	defer udpC.Close()
	go func() {
		for {
			c, err := tcpL.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := udpC.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = udpC.WriteTo(buf[:n], from)
		}
	}()
	tcpDst := tcpL.Addr().(*net.TCPAddr).AddrPort()
	udpDst := udpC.LocalAddr().(*net.UDPAddr).AddrPort()
	tw := Tuple{Proto: "tcp", Src: netip.AddrPortFrom(lo, uint16(low)), Dst: netip.AddrPortFrom(lo, tcpDst.Port())}
	if got, err := probe(ctx, ns.Name(), tw); err != nil || !strings.Contains(got, "address already in use") {
		t.Errorf("probe from port %d in TIME_WAIT: %q, %v; want a bind failure (address already in use)", low, got, err)
	}

	for _, tc := range []struct {
		proto string
		dst   netip.AddrPort
		want  string
	}{
		{"tcp", netip.AddrPortFrom(lo, tcpDst.Port()), "connected"},
		{"udp", netip.AddrPortFrom(lo, udpDst.Port()), "answered"},
	} {
		rp, err := reservePort(ns.Name(), tc.proto, lo)
		if err != nil {
			t.Fatalf("%s: %v", tc.proto, err)
		}
		if tc.proto == "tcp" && int(rp.Port) != low+1 {
			t.Errorf("tcp: reserved port %d, want %d (%d is in TIME_WAIT)", rp.Port, low+1, low)
		}
		if int(rp.Port) < low || int(rp.Port) > low+1 {
			t.Errorf("%s: reserved port %d, outside the netns's ip_local_port_range %d-%d", tc.proto, rp.Port, low, low+1)
		}
		got, err := probe(ctx, ns.Name(), Tuple{Proto: tc.proto, Src: netip.AddrPortFrom(lo, rp.Port), Dst: tc.dst})
		if err != nil || got != tc.want {
			t.Errorf("%s: probe from the reserved port %d while it is held: %q, %v; want %q", tc.proto, rp.Port, got, err, tc.want)
		}
		if err := rp.Close(); err != nil {
			t.Errorf("%s: close the reservation: %v", tc.proto, err)
		}
	}
	if _, err := reservePort(ns.Name(), "sctp", lo); err == nil {
		t.Error("sctp: reserved a port, want an error (only tcp and udp are probed)")
	}
}
