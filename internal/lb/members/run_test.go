package members

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"
)

// TestRun runs two speakers over an in-memory network in a synctest bubble
// (Run's timers and the test's on the bubble's clock): they find each other,
// a killed one is declared dead by the expiry timer (no packet needed) no
// earlier than Timeout after it was last heard, a restart is alive at once,
// readiness changes are seen at once, and a clean stop is seen at once
// through the "leaving" datagram.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mn memNet
		c1, c2 := mn.listen(addr1), mn.listen(addr2)
		log1, log2 := &logSink{}, &logSink{}
		newNode := func(name string, log *logSink, peers map[string][]netip.Addr) *Members {
			m, err := New(Config{NodeName: name, Logger: log.logger(), Keys: testKeys})
			if err != nil {
				t.Fatal(err)
			}
			m.SetPeers(peers)
			m.SetReady(true)
			return m
		}
		m1 := newNode("node1", log1, map[string][]netip.Addr{"node2": {addr2}, "node3": {addr3}})
		m2 := newNode("node2", log2, map[string][]netip.Addr{"node1": {addr1}})
		stop1 := runIn(t, m1, c1)
		runIn(t, m2, c2)
		waitAlive(t, m2, "node1", true, time.Second)
		waitAlive(t, m1, "node2", true, time.Second)
		// m2 heard node1, so its Run is receiving: a second Run must refuse.
		if err := m2.Run(t.Context(), c2); err == nil || err.Error() != "members: already running" {
			t.Errorf("second Run = %v, want already running", err)
		}

		// Kill node1: nothing it sends arrives any more, not even its leave.
		c1.dead.Store(true)
		killed := time.Now()
		if err := stop1(); err != nil {
			t.Fatal(err)
		}
		took := waitAlive(t, m2, "node1", false, 3*time.Second)
		sinceKill := time.Since(killed)
		t.Logf("killed peer declared dead %s after the kill", sinceKill.Round(time.Millisecond))
		if sinceKill > m2.Timeout()+time.Second || took < 0 {
			t.Errorf("dead after %s, want about Timeout (%s)", sinceKill, m2.Timeout())
		}
		if log2.count(`"peer dead"`, `"node"="node1"`, `"reason"="timeout"`) != 1 {
			t.Errorf("want one timeout death of node1 in node2's log: %q", log2.Lines())
		}

		// Restart node1 as a new process: alive at once. Then stop it cleanly.
		c1.dead.Store(false)
		m1b := newNode("node1", log1, map[string][]netip.Addr{"node2": {addr2}})
		stop1b := runIn(t, m1b, c1)
		if d := waitAlive(t, m2, "node1", true, time.Second); d > m2.Interval() {
			t.Errorf("restarted node1 alive after %s, want within one Interval (first heartbeat is sent at once)", d)
		}
		// Readiness changes reach the peer at once, not at the next Interval.
		for _, ready := range []bool{false, true} {
			m1b.SetReady(ready)
			if d := waitAlive(t, m2, "node1", ready, time.Second); d >= m2.Interval() {
				t.Errorf("SetReady(%v) seen after %s, want before the next Interval", ready, d)
			}
		}
		stopped := time.Now()
		if err := stop1b(); err != nil {
			t.Fatal(err)
		}
		waitAlive(t, m2, "node1", false, time.Second)
		if d := time.Since(stopped); d >= m2.Timeout() {
			t.Errorf("cleanly stopped node1 dead after %s, want before Timeout (leave datagram)", d)
		}
		if log2.count(`"peer dead"`, `"node"="node1"`, `"reason"="left"`) != 1 {
			t.Errorf("want one leave of node1 in node2's log: %q", log2.Lines())
		}
		if n := log1.count(`"heartbeat send failed"`, `"node"="node3"`); n != 1 {
			t.Errorf("unreachable node3 logged %d times by the first node1, want once while it lasts", n)
		}
	})
}

// TestRunClosedConn: Run fails, rather than spinning, when its socket is closed.
func TestRunClosedConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mn memNet
		c := mn.listen(addr1)
		m, err := New(Config{NodeName: "node1", Logger: (&logSink{}).logger(), Keys: testKeys})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- m.Run(t.Context(), c) }()
		c.Close()
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("Run = %v, want net.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its conn was closed")
		}
	})
}
