package members

import (
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// TestQueuedHeartbeatsWinOverExpiry: when the Timeout of a peer runs out
// while datagrams wait unread (this process was stalled), the peer is not
// declared dead: the queued heartbeat, once read, keeps it alive without a
// Changed signal. While datagrams keep waiting, the peer dies Interval after
// its Timeout at the latest.
func TestQueuedHeartbeatsWinOverExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &logSink{}
		m := newTestMembers(t, log)
		queued := true
		m.queued = func() bool { return queued }
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 100, 1), addr2); err != nil {
			t.Fatal(err)
		}
		drain(m)
		time.Sleep(400 * time.Millisecond)
		if got := aliveNames(m); got != "node1,node2" || drain(m) {
			t.Fatalf("at Timeout with datagrams queued: Alive = %s, want node1,node2 and no change", got)
		}
		// The stalled reader catches up: the queued heartbeat counts.
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 100, 2), addr2); err != nil {
			t.Fatal(err)
		}
		if got := aliveNames(m); got != "node1,node2" || drain(m) || log.count(`"peer dead"`) != 0 {
			t.Fatalf("after the queued heartbeat: Alive = %s, log %q", got, log.Lines())
		}
		// A port kept busy (a flood) delays a silent peer's death by
		// Interval at most from when its Timeout was found run out.
		time.Sleep(400 * time.Millisecond)
		if got := aliveNames(m); got != "node1,node2" {
			t.Fatalf("at Timeout, datagrams queued: Alive = %s", got)
		}
		time.Sleep(100*time.Millisecond - time.Nanosecond)
		if got := aliveNames(m); got != "node1,node2" {
			t.Fatalf("1ns before Timeout+Interval: Alive = %s", got)
		}
		time.Sleep(time.Nanosecond)
		if got := aliveNames(m); got != "node1" || !drain(m) {
			t.Fatalf("at Timeout+Interval with datagrams queued: Alive = %s, want node1 and a change", got)
		}
		// A stall longer than Timeout+Interval: the first look finds
		// datagrams queued, and the heartbeat read after it counts.
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 100, 3), addr2); err != nil {
			t.Fatal(err)
		}
		drain(m)
		time.Sleep(2 * time.Second)
		if got := aliveNames(m); got != "node1,node2" {
			t.Fatalf("after a 2s stall, datagrams queued: Alive = %s", got)
		}
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 100, 4), addr2); err != nil {
			t.Fatal(err)
		}
		if got := aliveNames(m); got != "node1,node2" || drain(m) {
			t.Fatalf("after the stall's heartbeat: Alive = %s", got)
		}
		// Nothing queued: Timeout alone.
		queued = false
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 100, 5), addr2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		if got := aliveNames(m); got != "node1" {
			t.Fatalf("at Timeout with nothing queued: Alive = %s, want node1", got)
		}
	})
}

// TestQueuedOfSocket: queuedOf reads a real UDP socket's receive queue (on
// loopback): true while a datagram waits, false once it is read; nil for a
// conn that is no socket.
func TestQueuedOfSocket(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	queued := queuedOf(rx)
	if queued == nil || queued() {
		t.Fatal("empty socket: queued reports a datagram (or cannot ask)")
	}
	if _, err := tx.Write([]byte("heartbeat")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !queued() {
		if time.Now().After(deadline) {
			t.Fatal("a datagram sent over loopback never showed as queued")
		}
		time.Sleep(time.Millisecond)
	}
	buf := make([]byte, 64)
	if _, _, err := rx.ReadFrom(buf); err != nil {
		t.Fatal(err)
	}
	if queued() {
		t.Error("queued after the only datagram was read")
	}
	if queuedOf(struct{ net.PacketConn }{rx}) != nil {
		t.Error("queuedOf of a wrapped conn that is no syscall.Conn is not nil")
	}
}
