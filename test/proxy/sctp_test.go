package proxy_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netns"
)

// TestSCTP: an SCTP ClusterIP is DNATed to its endpoint.
//
// This kernel tracks SCTP in conntrack but may have no SCTP sockets
// (socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails with EPROTONOSUPPORT),
// so there is no SCTP echo server: a pod sends a raw SCTP INIT to the
// ClusterIP, and the test checks that (1) the endpoint pod receives it on the
// target port from the sender's own address (a raw socket there sees every
// SCTP packet), and (2) the node's conntrack shows the flow translated to
// the endpoint.
func TestSCTP(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 11)
	client := c.addPod("client", 20)
	t.Logf("SCTP sockets in this kernel: %v", sctpSockets(client.ns))
	svc := newService("sctp", []string{"10.96.0.130"}, svcPort(corev1.ProtocolSCTP, 9999))
	c.apply(svc, v4(svc, local(a)))
	c.startProxy()
	eventually(t, 10*time.Second, "SCTP frontend programmed", func() (bool, string) {
		fronts, state := c.plane().frontends()
		return slices.Contains(fronts, frontendKey("sctp", netip.MustParseAddr("10.96.0.130"), 9999)), state
	})

	rx := listenSCTPRaw(t, a.ns)
	var got sctpSeen
	eventually(t, 10*time.Second, "SCTP INIT delivered to the endpoint", func() (bool, string) {
		sport := uint16(40000 + time.Now().UnixNano()%20000)
		if err := sendSCTPInit(client.ns, netip.MustParseAddr("10.96.0.130"), sport, 9999); err != nil {
			return false, err.Error()
		}
		s, err := rx.next(sport, 500*time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		got = s
		return true, ""
	})
	if got.from != client.ip || got.dport != echoPort {
		t.Errorf("endpoint got the INIT from %v to port %d, want from %v (not masqueraded) to %d", got.from, got.dport, client.ip, echoPort)
	}
	ct := c.mustNode("conntrack", "-L", "-p", "sctp")
	want := regexp.MustCompile(fmt.Sprintf(`src=%s dst=10\.96\.0\.130 sport=%d dport=9999 .*src=%s dst=%s sport=%d dport=%d`,
		regexp.QuoteMeta(client.ip.String()), got.sport, regexp.QuoteMeta(a.ip.String()), regexp.QuoteMeta(client.ip.String()), echoPort, got.sport))
	if !want.MatchString(ct) {
		t.Errorf("node conntrack has no translated SCTP flow matching %s:\n%s", want, ct)
	}
}

// sctpSockets reports whether SCTP sockets can be opened in ns.
func sctpSockets(ns *netns.NS) bool {
	err := ns.Do(func() error {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, syscall.IPPROTO_SCTP)
		if err == nil {
			syscall.Close(fd)
		}
		return err
	})
	return err == nil
}

// sendSCTPInit sends one SCTP INIT chunk from ns to dst:dport with source
// port sport, through a raw IP socket (the kernel adds the IP header).
func sendSCTPInit(ns *netns.NS, dst netip.Addr, sport, dport uint16) error {
	pkt := make([]byte, 12+20)
	binary.BigEndian.PutUint16(pkt[0:], sport)
	binary.BigEndian.PutUint16(pkt[2:], dport)
	// Verification tag 0 (INIT), checksum filled in below.
	init := pkt[12:]
	init[0] = 1 // INIT
	binary.BigEndian.PutUint16(init[2:], 20)
	binary.BigEndian.PutUint32(init[4:], 0x5eed1234) // initiate tag
	binary.BigEndian.PutUint32(init[8:], 65536)      // a_rwnd
	binary.BigEndian.PutUint16(init[12:], 1)         // outbound streams
	binary.BigEndian.PutUint16(init[14:], 1)         // inbound streams
	binary.BigEndian.PutUint32(init[16:], 1)         // initial TSN
	// SCTP's CRC32c goes on the wire in little-endian order (RFC 4960 B).
	binary.LittleEndian.PutUint32(pkt[8:], crc32.Checksum(pkt, crc32.MakeTable(crc32.Castagnoli)))
	var conn net.Conn
	if err := ns.Do(func() error {
		var err error
		conn, err = net.Dial("ip4:132", dst.String())
		return err
	}); err != nil {
		return fmt.Errorf("raw sctp socket: %w", err)
	}
	defer conn.Close()
	_, err := conn.Write(pkt)
	return err
}

// sctpRaw receives every SCTP packet arriving in a namespace.
type sctpRaw struct{ conn net.PacketConn }

type sctpSeen struct {
	from         netip.Addr
	sport, dport uint16
}

func listenSCTPRaw(t testing.TB, ns *netns.NS) *sctpRaw {
	t.Helper()
	var pc net.PacketConn
	if err := ns.Do(func() error {
		var err error
		pc, err = net.ListenPacket("ip4:132", "0.0.0.0")
		return err
	}); err != nil {
		t.Fatalf("raw sctp listener: %v", err)
	}
	t.Cleanup(func() { pc.Close() })
	return &sctpRaw{conn: pc}
}

// next returns the first packet with source port sport within timeout.
func (r *sctpRaw) next(sport uint16, timeout time.Duration) (sctpSeen, error) {
	_ = r.conn.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 2048)
	for {
		n, from, err := r.conn.ReadFrom(buf)
		if err != nil {
			return sctpSeen{}, err
		}
		if n < 12 {
			continue
		}
		src, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
		s := sctpSeen{from: src.Unmap(), sport: binary.BigEndian.Uint16(buf[0:]), dport: binary.BigEndian.Uint16(buf[2:])}
		if s.sport == sport {
			return s, nil
		}
	}
}
