package members

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// reasonCounter records Config.Rejected calls.
type reasonCounter map[string]int

func (c reasonCounter) count(reason string) {
	if !slices.Contains(RejectReasons, reason) {
		panic("unknown reason " + reason)
	}
	c[reason]++
}

// newAuthMembers is node1 with keys, counting rejections into c.
func newAuthMembers(t *testing.T, keys *Keyring, c reasonCounter) *Members {
	t.Helper()
	m, err := New(Config{NodeName: "node1", Logger: (&logSink{}).logger(), Keys: keys, Rejected: c.count})
	if err != nil {
		t.Fatal(err)
	}
	m.SetPeers(labPeers())
	drain(m)
	return m
}

// TestRejected: each datagram a forger or a replayer can send, after node2 was
// heard alive at incarnation 100 seq 5, is refused with its reason, counted
// once under that reason, and changes nothing: node2 stays alive, and no
// refused datagram extends its life past Timeout.
func TestRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		window := DefaultStampWindow
		sign := func(k kind, name string, inc int64, seq uint64, stamp time.Time, keys *Keyring) []byte {
			return encode(nil, message{kind: k, name: name, incarnation: inc, seq: seq, ready: true, stamp: stamp.UnixNano()}, keys)
		}
		flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 1; return b }
		genuine := sign(kindHeartbeat, "node2", 100, 5, now, testKeys)
		cases := []struct {
			name   string
			pkt    []byte
			src    netip.Addr
			want   error
			reason string
		}{
			{"unsigned heartbeat", encode(nil, message{kind: kindHeartbeat, name: "node2", incarnation: 100, seq: 6, ready: true}, nil), addr2, errUnsigned, RejectUnsigned},
			{"unsigned leave", encode(nil, message{kind: kindLeave, name: "node2", incarnation: 100, seq: 6}, nil), addr2, errUnsigned, RejectUnsigned},
			{"leave signed with a wrong key", sign(kindLeave, "node2", 100, 6, now, otherKeys), addr2, errBadSignature, RejectBadSignature},
			{"heartbeat signed with a wrong key", sign(kindHeartbeat, "node3", 1, 1, now, otherKeys), addr3, errBadSignature, RejectBadSignature},
			{"flipped bit in a genuine name", flip(genuine, headerLen+4), addr2, errBadSignature, RejectBadSignature},
			{"flipped bit in a genuine sequence", flip(genuine, 23), addr2, errBadSignature, RejectBadSignature},
			{"flipped bit in a genuine MAC", flip(genuine, len(genuine)-tagLen), addr2, errBadSignature, RejectBadSignature},
			{"garbage", []byte("GET / HTTP/1.0\r\n\r\n...."), addr2, errMalformed, RejectMalformed},
			{"replayed genuine heartbeat", genuine, addr2, errStale, RejectReplayed},
			{"replayed older sequence as a leave", sign(kindLeave, "node2", 100, 4, now, testKeys), addr2, errStale, RejectReplayed},
			{"older incarnation", sign(kindLeave, "node2", 99, 50, now, testKeys), addr2, errStale, RejectReplayed},
			{"timestamp before the window", sign(kindLeave, "node2", 100, 6, now.Add(-window-time.Millisecond), testKeys), addr2, errStaleStamp, RejectStaleTimestamp},
			{"timestamp after the window", sign(kindLeave, "node2", 100, 6, now.Add(window+time.Millisecond), testKeys), addr2, errStaleStamp, RejectStaleTimestamp},
			{"newer incarnation stamped before the window", sign(kindHeartbeat, "node2", 200, 1, now.Add(-time.Hour), testKeys), addr2, errStaleStamp, RejectStaleTimestamp},
			{"genuine, from a stranger's address", sign(kindLeave, "node2", 100, 6, now, testKeys), spoof, errWrongSource, RejectWrongSource},
			{"own name", sign(kindLeave, "node1", 100, 6, now, testKeys), addr1, errUnknownPeer, RejectUnknownPeer},
			{"unknown node", sign(kindHeartbeat, "node9", 1, 1, now, testKeys), addr2, errUnknownPeer, RejectUnknownPeer},
		}
		c := reasonCounter{}
		m := newAuthMembers(t, testKeys, c)
		if err := m.handle(now, genuine, addr2); err != nil {
			t.Fatal(err)
		}
		drain(m)
		want := reasonCounter{}
		for _, tc := range cases {
			err := m.handle(now, tc.pkt, tc.src)
			if !errors.Is(err, tc.want) {
				t.Errorf("%s: handle = %v, want %v", tc.name, err, tc.want)
			}
			want[tc.reason]++
			if got := aliveNames(m); got != "node1,node2" || drain(m) {
				t.Fatalf("%s: Alive = %s (or Changed signalled), want node1,node2 unchanged", tc.name, got)
			}
		}
		if !maps.Equal(c, want) {
			t.Errorf("rejections counted %v, want %v", c, want)
		}
		// None of them refreshed node2: it dies Timeout after the genuine one.
		time.Sleep(m.Timeout())
		if got := aliveNames(m); got != "node1" {
			t.Errorf("Timeout after the last genuine heartbeat: Alive = %s, want node1", got)
		}
		// Window edges count (inclusive), and the timestamp is the sender's.
		for _, d := range []time.Duration{-window, window} {
			c := reasonCounter{}
			m := newAuthMembers(t, testKeys, c)
			if err := m.handle(time.Now(), sign(kindHeartbeat, "node2", 1, 1, time.Now().Add(d), testKeys), addr2); err != nil {
				t.Errorf("timestamp %s from the receiver's clock: %v, want counted", d, err)
			}
			if len(c) != 0 {
				t.Errorf("counted %v for an accepted heartbeat", c)
			}
		}
	})
}

// TestReplayAfterDeath: a dead node's recorded heartbeats cannot bring it back:
// those the receiver heard are replays, and any of them is refused once older
// than the window, even by a receiver that restarted and heard none of them.
func TestReplayAfterDeath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := reasonCounter{}
		m := newAuthMembers(t, testKeys, c)
		var recorded [][]byte
		for seq := uint64(1); seq <= 3; seq++ {
			pkt := hb(time.Now(), "node2", 100, seq)
			recorded = append(recorded, pkt)
			if err := m.handle(time.Now(), pkt, addr2); err != nil {
				t.Fatal(err)
			}
			time.Sleep(DefaultInterval)
		}
		time.Sleep(m.Timeout()) // node2 killed: silent
		if got := aliveNames(m); got != "node1" {
			t.Fatalf("after Timeout: Alive = %s, want node1", got)
		}
		for _, pkt := range recorded {
			if err := m.handle(time.Now(), pkt, addr2); !errors.Is(err, errStale) {
				t.Errorf("replayed heartbeat of the dead node = %v, want errStale", err)
			}
		}
		// A receiver that restarts knows nothing of node2: only the window holds.
		time.Sleep(DefaultStampWindow)
		restarted := newAuthMembers(t, testKeys, c)
		for _, pkt := range recorded {
			if err := restarted.handle(time.Now(), pkt, addr2); !errors.Is(err, errStaleStamp) {
				t.Errorf("replay at a restarted receiver = %v, want errStaleStamp", err)
			}
		}
		if got := aliveNames(restarted); got != "node1" {
			t.Errorf("restarted receiver: Alive = %s, want node1", got)
		}
		if want := (reasonCounter{RejectReplayed: 3, RejectStaleTimestamp: 3}); !maps.Equal(c, want) {
			t.Errorf("counted %v, want %v", c, want)
		}
	})
}

// TestKeyRotation walks the rotation Keyring documents across two nodes: at
// every step each verifies what the other signs; a key once removed verifies
// nothing.
func TestKeyRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		oldK, newK := "old-key-0123456789abcdef", "new-key-0123456789abcdef"
		c := reasonCounter{}
		recv := newAuthMembers(t, mustKeys(oldK), c)
		seq := uint64(0)
		send := func(senderKeys *Keyring) error {
			seq++
			return recv.handle(time.Now(), encode(nil, message{kind: kindHeartbeat, name: "node2", incarnation: 1, seq: seq, ready: true, stamp: time.Now().UnixNano()}, senderKeys), addr2)
		}
		steps := []struct {
			name         string
			sender, recv *Keyring
			ok           bool
		}{
			{"both on the old key", mustKeys(oldK), mustKeys(oldK), true},
			{"receiver adds the new key second", mustKeys(oldK), mustKeys(oldK, newK), true},
			{"sender signs with the new key first", mustKeys(newK, oldK), mustKeys(oldK, newK), true},
			{"receiver signs with the new key too", mustKeys(newK, oldK), mustKeys(newK, oldK), true},
			{"receiver removes the old key; sender still has it second", mustKeys(newK, oldK), mustKeys(newK), true},
			{"a datagram signed with the removed key", mustKeys(oldK), mustKeys(newK), false},
		}
		for _, s := range steps {
			if err := recv.SetKeys(s.recv); err != nil {
				t.Fatal(err)
			}
			err := send(s.sender)
			if (err == nil) != s.ok || (err != nil && !errors.Is(err, errBadSignature)) {
				t.Errorf("%s: handle = %v, want accepted %v", s.name, err, s.ok)
			}
		}
		if want := (reasonCounter{RejectBadSignature: 1}); !maps.Equal(c, want) {
			t.Errorf("counted %v, want %v", c, want)
		}
		if err := recv.SetKeys(nil); err == nil {
			t.Error("SetKeys(nil) accepted")
		}
	})
}

// TestInsecure: without keys, heartbeats are unsigned both ways, and a signed
// one is refused as malformed (it could not be checked).
func TestInsecure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := reasonCounter{}
		m, err := New(Config{NodeName: "node1", Logger: (&logSink{}).logger(), Insecure: true, Rejected: c.count})
		if err != nil {
			t.Fatal(err)
		}
		m.SetPeers(labPeers())
		if err := m.handle(time.Now(), encode(nil, message{kind: kindHeartbeat, name: "node2", incarnation: 1, seq: 1, ready: true}, nil), addr2); err != nil {
			t.Fatalf("unsigned heartbeat at an insecure node: %v", err)
		}
		if err := m.handle(time.Now(), hb(time.Now(), "node3", 1, 1), addr3); !errors.Is(err, errMalformed) {
			t.Errorf("signed heartbeat at an insecure node: %v, want errMalformed", err)
		}
		if got := aliveNames(m); got != "node1,node2" {
			t.Errorf("Alive = %s, want node1,node2", got)
		}
		if err := m.SetKeys(testKeys); err == nil {
			t.Error("SetKeys on an insecure Members accepted")
		}
		if !maps.Equal(c, reasonCounter{RejectMalformed: 1}) {
			t.Errorf("counted %v, want one malformed", c)
		}
	})
}

func TestParseKeys(t *testing.T) {
	raw := bytes.Repeat([]byte{0xa5}, 32)
	b64 := base64.StdEncoding.EncodeToString(raw)
	cases := []struct {
		name, file string
		want       [][]byte
		wantErr    string
	}{
		{"base64", b64, [][]byte{raw}, ""},
		{"base64 with newline, as a Secret's value", b64 + "\n", [][]byte{raw}, ""},
		{"base64 without padding", strings.TrimRight(base64.StdEncoding.EncodeToString(raw[:31]), "="), [][]byte{raw[:31]}, ""},
		{"hex", hex.EncodeToString(raw), [][]byte{raw}, ""},
		{"two keys, comments and blank lines", "# signing\n  " + b64 + "  \n\n# verifying only\n" + hex.EncodeToString([]byte("second-key-0123456789")) + "\n",
			[][]byte{raw, []byte("second-key-0123456789")}, ""},
		{"CRLF", b64 + "\r\n" + b64 + "\r\n", [][]byte{raw, raw}, ""},
		{"empty", "", nil, "no key in it"},
		{"only comments", "# nothing\n\n", nil, "no key in it"},
		{"too short", base64.StdEncoding.EncodeToString(raw[:15]), nil, "line 1: key of 15 bytes, want 16 to 1024"},
		{"not base64", b64 + "\nnot a key!\n", nil, "line 2: neither base64 nor hex"},
		{"too many", strings.Repeat(b64+"\n", MaxKeys+1), nil, "17 keys, want at most 16"},
	}
	for _, tc := range cases {
		k, err := ParseKeys([]byte(tc.file))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: ParseKeys = %v, want error containing %q", tc.name, err, tc.wantErr)
			} else if strings.Contains(err.Error(), b64) {
				t.Errorf("%s: the error shows a key: %v", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.EqualFunc(k.keys, tc.want, bytes.Equal) {
			t.Errorf("%s: keys %x, want %x", tc.name, k.keys, tc.want)
		}
	}
	g1, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := GenerateKey()
	k, err := ParseKeys([]byte(g1 + "\n" + g2 + "\n"))
	if err != nil || k.Len() != 2 || len(k.keys[0]) != 32 || bytes.Equal(k.keys[0], k.keys[1]) {
		t.Errorf("generated keys: %v %v, want two distinct 32-byte keys", k, err)
	}
	if ids := k.IDs(); len(ids) != 2 || len(ids[0]) != 8 || strings.Contains(g1, ids[0]) {
		t.Errorf("IDs %v: want 8 hex digits each, not part of the key", ids)
	}
}

// TestWatchKeyFile: a rotation written to the file reaches the Members, a
// content only once it held still for one poll (a half-written file is never
// taken); a file that breaks keeps the keys in use, and its error, which names
// the file and the line, is logged once.
func TestWatchKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	oldK, newK := "old-key-0123456789abcdef", "new-key-0123456789abcdef"
	line := func(k string) string { return base64.StdEncoding.EncodeToString([]byte(k)) }
	write := func(content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(line(oldK) + "\n")
	keys, err := ReadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "missing")) {
		t.Errorf("missing file: %v, want an error naming it", err)
	}
	log := &logSink{}
	m, err := New(Config{NodeName: "node1", Logger: log.logger(), Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	w := &keyWatch{m: m, path: path}
	steps := []struct {
		name    string
		content string // "" leaves the file as it is
		want    *Keyring
	}{
		{"first read of an unchanged file", "", mustKeys(oldK)},
		{"second read: the same keys, nothing to do", "", mustKeys(oldK)},
		{"new key second, read once", line(oldK) + "\n" + line(newK) + "\n", mustKeys(oldK)},
		{"read again unchanged: taken", "", mustKeys(oldK, newK)},
		{"caught half written: empty", " ", mustKeys(oldK, newK)},
		{"caught half written: a part of a key", line(newK)[:24], mustKeys(oldK, newK)},
		{"new key first", line(newK) + "\n" + line(oldK) + "\n", mustKeys(oldK, newK)},
		{"new key first, held still", "", mustKeys(newK, oldK)},
		{"broken", "not a key!\n", mustKeys(newK, oldK)},
		{"broken, held still", "", mustKeys(newK, oldK)},
		{"broken, still", "", mustKeys(newK, oldK)},
		{"old key removed", line(newK) + "\n", mustKeys(newK, oldK)},
		{"old key removed, held still", "", mustKeys(newK)},
	}
	for _, s := range steps {
		if s.content != "" {
			write(s.content)
		}
		w.poll()
		if got := m.keys.Load(); !got.Equal(s.want) {
			t.Fatalf("%s: keys %v, want %v", s.name, got.IDs(), s.want.IDs())
		}
	}
	if n := log.count(`"heartbeat keys not reloaded`); n != 1 || log.count(`"heartbeat keys not reloaded`, path, "line 1: neither base64 nor hex") != 1 {
		t.Errorf("errors logged %d times, want once, naming file and line: %q", n, log.Lines())
	}
	if n := log.count(`"heartbeat keys reloaded"`); n != 3 {
		t.Errorf("%d reloads logged, want 3: %q", n, log.Lines())
	}
	for _, l := range log.Lines() {
		if strings.Contains(l, line(newK)) || strings.Contains(l, line(oldK)) {
			t.Errorf("a log line shows a key: %s", l)
		}
	}

	// WatchKeyFile polls until its context ends.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.WatchKeyFile(ctx, path, 5*time.Millisecond) }()
	write(line(oldK) + "\n")
	for i := 0; i < 1000 && !m.keys.Load().Equal(mustKeys(oldK)); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchKeyFile: %v", err)
	}
	if !m.keys.Load().Equal(mustKeys(oldK)) {
		t.Errorf("WatchKeyFile did not take the file's key within 5s: %v", m.keys.Load().IDs())
	}
	insecure, err := New(Config{NodeName: "node1", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := insecure.WatchKeyFile(t.Context(), path, 0); err == nil {
		t.Error("WatchKeyFile on an insecure Members: no error")
	}
}
