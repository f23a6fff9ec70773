package members

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestNewConfig(t *testing.T) {
	k := testKeys
	cases := []struct {
		name    string
		cfg     Config
		wantErr string
		want    Config // Port, Interval, Timeout, StampWindow after defaults
	}{
		{name: "defaults", cfg: Config{NodeName: "n", Keys: k}, want: Config{Port: 7947, Interval: 100 * time.Millisecond, Timeout: 400 * time.Millisecond, StampWindow: 5 * time.Second}},
		{name: "timeout follows interval", cfg: Config{NodeName: "n", Keys: k, Interval: time.Second}, want: Config{Port: 7947, Interval: time.Second, Timeout: 4 * time.Second, StampWindow: 5 * time.Second}},
		{name: "exactly 3x", cfg: Config{NodeName: "n", Keys: k, Port: 9000, Interval: 50 * time.Millisecond, Timeout: 150 * time.Millisecond, StampWindow: time.Second},
			want: Config{Port: 9000, Interval: 50 * time.Millisecond, Timeout: 150 * time.Millisecond, StampWindow: time.Second}},
		{name: "insecure", cfg: Config{NodeName: "n", Insecure: true}, want: Config{Port: 7947, Interval: 100 * time.Millisecond, Timeout: 400 * time.Millisecond, StampWindow: 5 * time.Second}},
		{name: "no name", cfg: Config{Keys: k}, wantErr: "no node name"},
		{name: "long name", cfg: Config{NodeName: strings.Repeat("n", 254), Keys: k}, wantErr: "longer than 253"},
		{name: "timeout too short", cfg: Config{NodeName: "n", Keys: k, Timeout: 299 * time.Millisecond}, wantErr: "less than 3×interval"},
		{name: "port", cfg: Config{NodeName: "n", Keys: k, Port: 70000}, wantErr: "port 70000"},
		{name: "negative", cfg: Config{NodeName: "n", Keys: k, Interval: -time.Second}, wantErr: "negative"},
		{name: "negative window", cfg: Config{NodeName: "n", Keys: k, StampWindow: -time.Second}, wantErr: "negative stamp window"},
		{name: "no keys", cfg: Config{NodeName: "n"}, wantErr: "no keys: heartbeats must be signed"},
		{name: "keys and insecure", cfg: Config{NodeName: "n", Keys: k, Insecure: true}, wantErr: "keys given with Insecure"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New = %v, want error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.cfg.Port != tc.want.Port || m.Interval() != tc.want.Interval || m.Timeout() != tc.want.Timeout || m.cfg.StampWindow != tc.want.StampWindow {
				t.Errorf("got port %d interval %s timeout %s window %s, want %d %s %s %s", m.cfg.Port, m.Interval(), m.Timeout(), m.cfg.StampWindow,
					tc.want.Port, tc.want.Interval, tc.want.Timeout, tc.want.StampWindow)
			}
		})
	}
}

// TestAliveUntilTimeout: one heartbeat makes a peer alive (and signals Changed);
// it stays alive for exactly Timeout and is dead at Timeout, without another
// packet, with Changed signalled again.
func TestAliveUntilTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &logSink{}
		m := newTestMembers(t, log)
		if got := aliveNames(m); got != "node1" {
			t.Fatalf("before any heartbeat Alive = %s, want only self", got)
		}
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 100, 1), addr2); err != nil {
			t.Fatal(err)
		}
		if !drain(m) {
			t.Error("Changed not signalled when node2 became alive")
		}
		if got := aliveNames(m); got != "node1,node2" {
			t.Errorf("Alive = %s, want node1,node2", got)
		}
		m.mu.Lock()
		next, ok := m.nextExpiryLocked()
		m.mu.Unlock()
		if !ok || !next.Equal(time.Now().Add(400*time.Millisecond)) {
			t.Errorf("next expiry = %v %v, want heard+400ms", next, ok)
		}
		time.Sleep(400*time.Millisecond - time.Nanosecond)
		if got := aliveNames(m); got != "node1,node2" || drain(m) {
			t.Errorf("1ns before Timeout: Alive = %s (changed signalled: see above), want node1,node2", got)
		}
		time.Sleep(time.Nanosecond)
		if got := aliveNames(m); got != "node1" {
			t.Errorf("at Timeout: Alive = %s, want node1", got)
		}
		if !drain(m) {
			t.Error("Changed not signalled when node2 died")
		}
		if log.count(`"peer dead"`, `"node"="node2"`, `"reason"="timeout"`) != 1 {
			t.Errorf("want one timeout log line, got %q", log.Lines())
		}
	})
}

func TestHeartbeatSources(t *testing.T) {
	cases := []struct {
		name    string
		pkt     []byte
		src     netip.Addr
		wantErr error
	}{
		{"primary address", hb(bubbleStart, "node2", 1, 1), addr2, nil},
		{"second address", hb(bubbleStart, "node2", 1, 1), addr2b, nil},
		{"IPv4-mapped source", hb(bubbleStart, "node2", 1, 1), netip.AddrFrom16(addr2.As16()), nil},
		{"other node's address", hb(bubbleStart, "node2", 1, 1), addr3, errWrongSource},
		{"spoofed name from a stranger", hb(bubbleStart, "node3", 1, 1), spoof, errWrongSource},
		{"own name", hb(bubbleStart, "node1", 1, 1), addr1, errUnknownPeer},
		{"unknown name", hb(bubbleStart, "node9", 1, 1), addr2, errUnknownPeer},
		{"garbage", []byte("GET / HTTP/1.0\r\n\r\n...."), addr2, errMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newTestMembers(t, &logSink{})
				err := m.handle(time.Now(), tc.pkt, tc.src)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("handle = %v, want %v", err, tc.wantErr)
				}
				alive := len(m.Alive()) > 1
				if alive != (tc.wantErr == nil) || drain(m) != alive {
					t.Errorf("after handle: Alive = %v, want a peer alive = %v (and Changed with it)", m.Alive(), tc.wantErr == nil)
				}
			})
		})
	}
}

// TestIncarnations: duplicates, reordering and strays from an older process do
// not count while a peer is alive; a restart (new incarnation) is alive at once;
// a dead peer accepts any new incarnation, even an older one.
func TestIncarnations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &logSink{}
		m := newTestMembers(t, log)
		step := func(pkt []byte, wantErr error, wantAlive string) {
			t.Helper()
			if err := m.handle(time.Now(), pkt, addr2); !errors.Is(err, wantErr) {
				t.Fatalf("handle = %v, want %v", err, wantErr)
			}
			if got := aliveNames(m); got != wantAlive {
				t.Fatalf("Alive = %s, want %s", got, wantAlive)
			}
		}
		step(hb(time.Now(), "node2", 100, 5), nil, "node1,node2")
		time.Sleep(300 * time.Millisecond)
		step(hb(time.Now(), "node2", 100, 5), errStale, "node1,node2") // duplicate
		step(hb(time.Now(), "node2", 100, 4), errStale, "node1,node2") // reordered
		step(hb(time.Now(), "node2", 99, 50), errStale, "node1,node2") // older process
		time.Sleep(100 * time.Millisecond)
		if got := aliveNames(m); got != "node1" {
			t.Fatalf("400ms after seq 5: Alive = %s, want node2 expired (stale heartbeats do not refresh)", got)
		}
		step(hb(time.Now(), "node2", 100, 6), nil, "node1,node2") // same incarnation, newer seq: back
		step(hb(time.Now(), "node2", 200, 1), nil, "node1,node2") // restart while alive: stays alive
		if log.count(`"peer restarted"`, `"incarnation"=200`) != 1 {
			t.Errorf("restart not logged: %q", log.Lines())
		}
		time.Sleep(time.Second)
		step(hb(time.Now(), "node2", 150, 1), nil, "node1,node2") // dead: a clock that stepped back is accepted
		step(hb(time.Now(), "node2", 200, 2), nil, "node1,node2") // and a newer one again
	})
}

// TestLeave: a leaving peer is dead at once; its incarnation never comes back;
// the next incarnation is alive at once.
func TestLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &logSink{}
		m := newTestMembers(t, log)
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 100, 1), addr2); err != nil {
			t.Fatal(err)
		}
		drain(m)
		if err := m.handle(time.Now(), leave(time.Now(), "node2", 100, 2), addr2); err != nil {
			t.Fatal(err)
		}
		if got := aliveNames(m); got != "node1" || !drain(m) {
			t.Fatalf("after leave: Alive = %s, want node1 and Changed", got)
		}
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 100, 3), addr2); !errors.Is(err, errStale) {
			t.Errorf("heartbeat of the left incarnation = %v, want errStale", err)
		}
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 101, 1), addr2); err != nil {
			t.Fatal(err)
		}
		if got := aliveNames(m); got != "node1,node2" || !drain(m) {
			t.Errorf("new incarnation: Alive = %s, want node1,node2 and Changed", got)
		}
		if log.count(`"peer dead"`, `"reason"="left"`) != 1 {
			t.Errorf("leave not logged: %q", log.Lines())
		}
	})
}

func TestSetPeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestMembers(t, &logSink{})
		for _, pk := range []struct {
			name string
			src  netip.Addr
		}{{"node2", addr2}, {"node3", addr3}} {
			if err := m.handle(time.Now(), hb(time.Now(), pk.name, 1, 1), pk.src); err != nil {
				t.Fatal(err)
			}
		}
		drain(m)
		// node3 leaves the model, node2 changes address: node2 stays alive.
		newAddr := netip.MustParseAddr("172.26.236.200")
		m.SetPeers(map[string][]netip.Addr{"node1": {addr1}, "node2": {newAddr}, "node4": nil})
		if got := aliveNames(m); got != "node1,node2" || !drain(m) {
			t.Errorf("after removing node3: Alive = %s, want node1,node2 and Changed", got)
		}
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 1, 2), addr2); !errors.Is(err, errWrongSource) {
			t.Errorf("heartbeat from node2's old address = %v, want errWrongSource", err)
		}
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 1, 2), newAddr); err != nil {
			t.Errorf("heartbeat from node2's new address = %v", err)
		}
		if err := m.handle(time.Now(), hb(time.Now(), "node4", 1, 1), addr3); !errors.Is(err, errUnknownPeer) {
			t.Errorf("node4 without addresses = %v, want errUnknownPeer", err)
		}
		// Setting the same peers again changes nothing.
		m.SetPeers(map[string][]netip.Addr{"node2": {newAddr}})
		if drain(m) || aliveNames(m) != "node1,node2" {
			t.Errorf("unchanged SetPeers signalled or lost node2: %s", aliveNames(m))
		}
	})
}

// TestReadiness: a heard peer counts as alive only while its heartbeats say it is
// ready; a restart that is not ready yet takes the peer out at once.
func TestReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &logSink{}
		m := newTestMembers(t, log)
		step := stepper(t, m)
		step(hbUnready(time.Now(), "node2", 100, 1), "node1", false) // heard, warming up
		time.Sleep(300 * time.Millisecond)
		step(hbUnready(time.Now(), "node2", 100, 2), "node1", false)
		step(hb(time.Now(), "node2", 100, 3), "node1,node2", true)         // ready
		step(hbUnready(time.Now(), "node2", 200, 1), "node1,node2", false) // restarted while alive: warming up in its grace
		step(hb(time.Now(), "node2", 200, 2), "node1,node2", false)        // ready again
		time.Sleep(400 * time.Millisecond)
		if got := aliveNames(m); got != "node1" || !drain(m) {
			t.Errorf("after Timeout: Alive = %s, want node1 and Changed", got)
		}
		if log.count(`"peer readiness changed"`, `"ready"=true`) != 2 || log.count(`"peer restarted"`, `"ready"=false`) != 1 {
			t.Errorf("log: %q", log.Lines())
		}
	})
}

// TestUnreadyPeerExpires: a heard but unready peer is still timed out (no
// Changed: it was never alive), so its restart is judged against a dead peer.
func TestUnreadyPeerExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestMembers(t, &logSink{})
		if err := m.handle(time.Now(), hbUnready(time.Now(), "node2", 100, 1), addr2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		m.Alive()
		m.mu.Lock()
		heard := m.peers["node2"].heard
		m.mu.Unlock()
		if heard || drain(m) {
			t.Errorf("unready peer still heard after Timeout (%v) or Changed signalled", heard)
		}
		if err := m.handle(time.Now(), hb(time.Now(), "node2", 50, 1), addr2); err != nil {
			t.Errorf("older incarnation of a dead peer: %v", err)
		}
	})
}

// TestRestartGrace: a peer that restarts while alive (a new incarnation
// before its Timeout ran out, as when its agent is killed and restarted at
// once) keeps counting alive while it warms up, for RestartGrace, so its IPs
// do not move; ready within the grace, nothing ever changed. Still unready
// when the grace ends, it is dropped then, with Changed, and the Run's timer
// is set for that moment. A peer that restarts after it died, or that left,
// gets no grace.
func TestRestartGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &logSink{}
		m := newTestMembers(t, log)
		grace := m.cfg.RestartGrace
		if grace != 10*m.Timeout() {
			t.Fatalf("default RestartGrace %s, want 10×Timeout", grace)
		}
		step := stepper(t, m)
		// Ready within the grace: alive throughout, no Changed at all.
		step(hb(time.Now(), "node2", 100, 1), "node1,node2", true)
		time.Sleep(100 * time.Millisecond)
		step(hbUnready(time.Now(), "node2", 200, 1), "node1,node2", false)
		for seq := uint64(2); seq < 10; seq++ { // heartbeats go on while it warms up
			time.Sleep(300 * time.Millisecond)
			step(hbUnready(time.Now(), "node2", 200, seq), "node1,node2", false)
		}
		step(hb(time.Now(), "node2", 200, 10), "node1,node2", false)
		for seq, start := uint64(11), time.Now(); time.Since(start) <= grace; seq++ { // past where the grace would end
			time.Sleep(300 * time.Millisecond)
			step(hb(time.Now(), "node2", 200, seq), "node1,node2", false)
		}

		// Unready when the grace ends: dropped exactly then, and the expiry timer
		// points at it.
		step(hbUnready(time.Now(), "node2", 300, 1), "node1,node2", false)
		start := time.Now()
		for seq := uint64(2); time.Since(start) < grace-300*time.Millisecond; seq++ {
			time.Sleep(300 * time.Millisecond)
			step(hbUnready(time.Now(), "node2", 300, seq), "node1,node2", false)
		}
		m.mu.Lock()
		next, ok := m.nextExpiryLocked()
		m.mu.Unlock()
		if want := start.Add(grace); !ok || !next.Equal(want) {
			t.Fatalf("next expiry %v (%v), want the grace's end %v", next, ok, want)
		}
		time.Sleep(time.Until(start.Add(grace)))
		if got := aliveNames(m); got != "node1" || !drain(m) {
			t.Fatalf("at the grace's end: Alive = %s, want node1 and Changed", got)
		}
		if log.count(`"peer not ready after its restart grace: its IPs move"`) != 1 {
			t.Errorf("end of the grace not logged: %q", log.Lines())
		}
		step(hb(time.Now(), "node2", 300, 100), "node1,node2", true) // ready later: alive again

		// Restarted after its Timeout ran out (dead): no grace.
		time.Sleep(m.Timeout())
		if got := aliveNames(m); got != "node1" || !drain(m) {
			t.Fatalf("after Timeout: Alive = %s, want node1 and Changed", got)
		}
		step(hbUnready(time.Now(), "node2", 400, 1), "node1", false)

		// Left, then restarted: no grace either.
		step(hb(time.Now(), "node2", 400, 2), "node1,node2", true)
		step(leave(time.Now(), "node2", 400, 3), "node1", true)
		step(hbUnready(time.Now(), "node2", 500, 1), "node1", false)
	})
}

// TestRejoins: a heartbeat sent a Timeout or more after the last one (this
// node's process stalled) counts a rejoin, logged and with Changed; regular
// heartbeats, and the first one, do not.
func TestRejoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &logSink{}
		m := newTestMembers(t, log)
		send := func(after time.Duration) {
			time.Sleep(after)
			m.mu.Lock()
			m.noteSendLocked(time.Now())
			m.mu.Unlock()
		}
		send(0)
		for range 10 {
			send(m.Interval())
		}
		send(m.Timeout() - time.Millisecond)
		if got := m.Rejoins(); got != 0 || drain(m) {
			t.Fatalf("after regular heartbeats: %d rejoins (Changed %v), want 0", got, !drain(m))
		}
		send(m.Timeout())
		if got := m.Rejoins(); got != 1 || !drain(m) {
			t.Fatalf("after a Timeout without a heartbeat: %d rejoins, want 1 and Changed", got)
		}
		send(3 * time.Second)
		if got := m.Rejoins(); got != 2 {
			t.Fatalf("after 3 s without a heartbeat: %d rejoins, want 2", got)
		}
		if n := log.count(`"this node sent no heartbeat for a Timeout or more: peers may have taken its IPs"`); n != 2 {
			t.Errorf("rejoins logged %d times, want 2: %q", n, log.Lines())
		}
	})
}
