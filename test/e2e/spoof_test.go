package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// The speakers' heartbeats, as internal/lb/members puts them on the wire;
// written out here independently, as an attacker would.
const (
	heartbeatPort   = 7947
	hbLeave         = 2
	hbHeartbeat     = 1
	hbFlagReady     = 1
	proxyMetricsURL = "http://127.0.0.1:10249/metrics"
	rejectedMetric  = "svcnet_proxy_speaker_heartbeats_rejected_total"
	// stampWindow is svcnet proxy's default --announce-heartbeat-window.
	stampWindow = 5 * time.Second
)

// heartbeat is a datagram seen on the wire.
type heartbeat struct {
	version, kind byte
	incarnation   int64
	seq           uint64
	name          string
	raw           []byte
	seen          time.Time
}

// parseHeartbeat reads the fields every version shares.
func parseHeartbeat(b []byte) (heartbeat, bool) {
	if len(b) < 24 || string(b[:4]) != "SVHB" {
		return heartbeat{}, false
	}
	hdr := 24
	if b[4] == 2 {
		hdr = 32
	}
	n := int(b[6])
	if len(b) < hdr+n {
		return heartbeat{}, false
	}
	return heartbeat{version: b[4], kind: b[5], incarnation: int64(binary.BigEndian.Uint64(b[8:16])),
		seq: binary.BigEndian.Uint64(b[16:24]), name: string(b[hdr : hdr+n]), raw: append([]byte(nil), b...)}, true
}

// forgeHeartbeat builds a datagram naming name: unsigned (version 1) without a
// key, else version 2 stamped now and signed with key.
func forgeHeartbeat(kind byte, name string, inc int64, seq uint64, key []byte) []byte {
	version := byte(1)
	if key != nil {
		version = 2
	}
	b := []byte("SVHB")
	b = append(b, version, kind, byte(len(name)), hbFlagReady)
	b = binary.BigEndian.AppendUint64(b, uint64(inc))
	b = binary.BigEndian.AppendUint64(b, seq)
	if key == nil {
		return append(b, name...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(time.Now().UnixNano()))
	b = append(b, name...)
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	return mac.Sum(b)
}

// forger sends UDP datagrams from the lab client with any source address: a
// raw IPv4 socket (IP_HDRINCL) opened in the client's namespace.
type forger struct {
	c  *ipv4.RawConn
	pc net.PacketConn
}

func newForger(t *testing.T, e *env) *forger {
	t.Helper()
	f := &forger{}
	err := netns.DoNamed(e.l.Names().Client(), func() error {
		pc, err := net.ListenPacket("ip4:udp", "0.0.0.0")
		if err != nil {
			return err
		}
		c, err := ipv4.NewRawConn(pc)
		if err != nil {
			pc.Close()
			return err
		}
		f.pc, f.c = pc, c
		return nil
	})
	if err != nil {
		t.Fatalf("raw socket in the client: %v", err)
	}
	t.Cleanup(func() { f.c.Close() })
	return f
}

// send writes payload in a UDP datagram from src:7947 to dst:7947 (UDP
// checksum 0: none, which IPv4 allows).
func (f *forger) send(t *testing.T, src, dst netip.Addr, payload []byte) {
	t.Helper()
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], heartbeatPort)
	binary.BigEndian.PutUint16(udp[2:], heartbeatPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	udp = append(udp, payload...)
	h := &ipv4.Header{Version: 4, Len: ipv4.HeaderLen, TotalLen: ipv4.HeaderLen + len(udp), TTL: 64,
		Protocol: syscall.IPPROTO_UDP, Src: src.AsSlice(), Dst: dst.AsSlice()}
	if err := f.c.WriteTo(h, udp, nil); err != nil {
		t.Fatalf("forged datagram %s -> %s: %v", src, dst, err)
	}
}

// captureHeartbeats reads the heartbeats node from sends node to off the
// wire (an AF_PACKET socket on the fabric's port to node to: ETH_P_ALL, the
// only kind that sees what the bridge sends out of a port), until n are seen,
// bounded by 5 s.
func captureHeartbeats(t *testing.T, e *env, from, to, n int) []heartbeat {
	t.Helper()
	proto := int(htons(unix.ETH_P_ALL))
	var fd int
	err := netns.DoNamed(e.l.Names().Fabric(), func() error {
		ifi, err := net.InterfaceByName(topology.NodeName(to))
		if err != nil {
			return err
		}
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, proto); err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind to %s: %w", ifi.Name, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("capture on the fabric: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000}); err != nil {
		t.Fatal(err)
	}
	src, dst := topology.NodeAddr(from).As4(), topology.NodeAddr(to).As4()
	var out []heartbeat
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(5 * time.Second); len(out) < n && time.Now().Before(deadline); {
		k, sa, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("capture: %v", err)
		}
		if ll, ok := sa.(*unix.SockaddrLinklayer); !ok || ll.Protocol != htons(unix.ETH_P_IP) {
			continue
		}
		p := buf[:k]
		if len(p) < 20 || p[0]>>4 != 4 || p[9] != syscall.IPPROTO_UDP || [4]byte(p[12:16]) != src || [4]byte(p[16:20]) != dst {
			continue
		}
		udp := p[int(p[0]&0xf)*4:]
		if len(udp) < 8 || binary.BigEndian.Uint16(udp[2:]) != heartbeatPort {
			continue
		}
		if hb, ok := parseHeartbeat(udp[8:]); ok && hb.name == topology.NodeName(from) {
			hb.seen = time.Now()
			out = append(out, hb)
		}
	}
	if len(out) < n {
		t.Fatalf("captured %d heartbeats of node%d to node%d in 5s, want %d", len(out), from, to, n)
	}
	return out
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// rejections returns node i's svcnet proxy's refused-heartbeat counters by reason.
func rejections(t *testing.T, e *env, i int) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for sample, v := range scrape(t, e.dialer(topology.NodeName(i)), proxyMetricsURL) {
		if rest, ok := strings.CutPrefix(sample, rejectedMetric+`{reason="`); ok {
			if reason, ok := strings.CutSuffix(rest, `"}`); ok {
				out[reason] = v
			}
		}
	}
	return out
}

// logLines counts the lines of node i's svcnet proxy log that hold every one of substrs.
func logLines(t *testing.T, e *env, i int, substrs ...string) int {
	t.Helper()
	b, err := os.ReadFile(e.l.ProxyLog(i))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
next:
	for _, line := range strings.Split(string(b), "\n") {
		for _, s := range substrs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		n++
	}
	return n
}

// answersFrom forgets the client's neighbour entry for ip, sends a request to
// it (a fresh ARP request) and returns the node that answered the ARP; it
// fails the test if the request is not answered.
func answersFrom(t *testing.T, e *env, ip netip.Addr) int {
	t.Helper()
	if out, err := e.l.Command(e.place("client"), "ip", "neigh", "flush", "to", ip.String(), "dev", "eth0").CombinedOutput(); err != nil {
		t.Fatalf("flush the client's neighbour entry for %s: %v: %s", ip, err, out)
	}
	if h := e.curl("client", fmt.Sprintf("http://%s:80/", ip), 1, 2*time.Second)[0]; h.Err != nil {
		t.Fatalf("%s not answered after a fresh ARP: %v", ip, h.Err)
	}
	n, err := e.l.Announcer(ip)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// heartbeatSpoofing: from the lab client, with a raw socket, datagrams whose
// source is a node's address claim (a) that the owner of a LoadBalancer IP
// left, and (b) that the owner, once its proxy is stopped, is alive again: each
// unsigned, signed with a wrong key, or a recording of the owner's genuine
// heartbeats replayed. The IP stays with its owner, then with the node it
// moved to; the receivers count each kind under its reason.
func heartbeatSpoofing(t *testing.T, e *env) {
	if st, err := os.Stat(e.l.Names().HeartbeatKey()); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("lab heartbeat key %s: %v, mode %v; want a file of mode 0600", e.l.Names().HeartbeatKey(), err, st)
	}
	ip := e.lbIP("web-lb")
	e.eventually("LB IP answers", func() error { return e.curl("client", fmt.Sprintf("http://%s:80/", ip), 1, time.Second)[0].Err })
	owner := answersFrom(t, e, ip)
	var others []int
	for i := 1; i <= 3; i++ {
		if i != owner {
			others = append(others, i)
		}
	}
	ownerName, ownerAddr := topology.NodeName(owner), topology.NodeAddr(owner)
	wrongKey := make([]byte, 32)
	if _, err := rand.Read(wrongKey); err != nil {
		t.Fatal(err)
	}
	recorded := captureHeartbeats(t, e, owner, others[0], 5)
	genuine := recorded[len(recorded)-1]
	if genuine.version != 2 || genuine.kind != hbHeartbeat {
		t.Fatalf("captured version %d kind %d, want signed (2) heartbeats (1)", genuine.version, genuine.kind)
	}
	t.Logf("%s is announced by node%d; recorded %d of its heartbeats to node%d (incarnation %d, seq %d-%d)",
		ip, owner, len(recorded), others[0], genuine.incarnation, recorded[0].seq, genuine.seq)
	f := newForger(t, e)
	before := map[int]map[string]float64{}
	for i := 1; i <= 3; i++ {
		before[i] = rejections(t, e, i)
	}
	// forgeAll sends every forgery of kind k for ownerName to each receiver,
	// with the recorded incarnation and a sequence ahead of the genuine one.
	forgeAll := func(k byte, seq uint64, receivers []int) {
		for _, r := range receivers {
			dst := topology.NodeAddr(r)
			f.send(t, ownerAddr, dst, forgeHeartbeat(k, ownerName, genuine.incarnation, seq, nil))
			f.send(t, ownerAddr, dst, forgeHeartbeat(k, ownerName, genuine.incarnation, seq, wrongKey))
			f.send(t, ownerAddr, dst, forgeHeartbeat(k, ownerName, time.Now().UnixNano(), 1, wrongKey))
			for _, hb := range recorded {
				f.send(t, ownerAddr, dst, hb.raw)
			}
		}
	}
	risen := func(receivers []int, reasons ...string) {
		t.Helper()
		for _, r := range receivers {
			after := rejections(t, e, r)
			for _, reason := range reasons {
				if after[reason] <= before[r][reason] {
					t.Errorf("node%d: %s{reason=%q} %v before, %v after: the forgeries were not counted", r, rejectedMetric, reason, before[r][reason], after[reason])
				}
			}
			t.Logf("node%d refused heartbeats: %v (before: %v)", r, after, before[r])
			before[r] = after
		}
	}

	// membership counts, per receiver, the lines its members log when the
	// owner turns alive or dead: the receivers' own view, which a forgery
	// that counted would change.
	membership := func(what string) map[int]int {
		out := map[int]int{}
		for _, r := range others {
			out[r] = logLines(t, e, r, `"peer `+what+`"`, `node="`+ownerName+`"`)
		}
		return out
	}
	unchanged := func(what string, before map[int]int) {
		t.Helper()
		for r, n := range membership(what) {
			if n != before[r] {
				t.Errorf("node%d logged \"peer %s\" for %s %d times during the forgeries: they counted", r, what, ownerName, n-before[r])
			}
		}
	}

	// (a) The owner is alive: forged leaves for it, for 2 s.
	deaths := membership("dead")
	for round := range 20 {
		forgeAll(hbLeave, genuine.seq+1000+uint64(round), others)
		time.Sleep(100 * time.Millisecond)
		if round%5 == 4 {
			if n := answersFrom(t, e, ip); n != owner {
				t.Fatalf("forged leaves moved %s from node%d to node%d", ip, owner, n)
			}
		}
	}
	if n := answersFrom(t, e, ip); n != owner {
		t.Fatalf("forged leaves moved %s from node%d to node%d", ip, owner, n)
	}
	unchanged("dead", deaths)
	risen(others, "unsigned", "bad-signature", "replayed")

	// (b) The owner's proxy is stopped (SIGSTOP: silent as a dead node, and
	// not restarted by its supervisor as a killed one would be): the IP moves;
	// forged heartbeats that say the owner is alive must not move it back to a
	// node that cannot answer.
	recorded = captureHeartbeats(t, e, owner, others[0], 3)
	genuine = recorded[len(recorded)-1]
	pid, err := e.l.ProxyPid(owner)
	if err != nil || pid == 0 {
		t.Fatalf("node%d's proxy: pid %d, %v", owner, pid, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Errorf("SIGCONT node%d's proxy: %v", owner, err)
		}
		if err := e.l.StartProxy(e.ctx, owner); err != nil {
			t.Errorf("node%d's proxy after SIGCONT: %v", owner, err)
		}
		// Heard again, the owner takes its IP back (and announces it again):
		// the next scenario starts from settled ownership.
		if _, err := e.l.WaitAnnouncer(e.ctx, ip, func(n int) bool { return n == owner }); err != nil {
			t.Errorf("node%d after SIGCONT: %v", owner, err)
		}
	})
	next, err := e.l.WaitAnnouncer(e.ctx, ip, func(n int) bool { return n != owner })
	if err != nil {
		t.Fatalf("after node%d's proxy was killed: %v", owner, err)
	}
	t.Logf("node%d's proxy stopped: node%d announces %s", owner, next, ip)
	revivals := membership("alive")
	// Until the recordings are older than the window they are replays;
	// after, their timestamps are stale.
	stale := recorded[len(recorded)-1].seen.Add(stampWindow + time.Second)
	ctx, cancel := context.WithTimeout(e.ctx, time.Until(stale)+3*time.Second)
	defer cancel()
	for round := 0; ctx.Err() == nil; round++ {
		forgeAll(hbHeartbeat, genuine.seq+2000+uint64(round), others)
		time.Sleep(100 * time.Millisecond)
		if round%5 == 4 {
			if n := answersFrom(t, e, ip); n != next {
				t.Fatalf("forged heartbeats of the silent node%d moved %s from node%d to node%d", owner, ip, next, n)
			}
		}
	}
	if n := answersFrom(t, e, ip); n != next {
		t.Fatalf("forged heartbeats of the silent node%d moved %s from node%d to node%d", owner, ip, next, n)
	}
	if st := procState(pid); st != 'T' {
		t.Fatalf("node%d's proxy %d: state %q; the test needs it stopped while its heartbeats are forged", owner, pid, st)
	}
	unchanged("alive", revivals)
	risen(others, "unsigned", "bad-signature", "replayed", "stale-timestamp")
}

// procState is the state letter of pid in /proc/PID/stat ('T' when stopped),
// or 0 when it is gone.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
