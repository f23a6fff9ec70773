package members

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/svcnet/svcnet/internal/logtest"
)

// bubbleStart is where the clock of every synctest bubble starts (midnight
// UTC 2000-01-01, as testing/synctest documents): the time at which a test
// that runs in a bubble makes datagrams before it.
var bubbleStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// logSink collects log lines for assertions.
type logSink struct{ logtest.Sink }

func (l *logSink) logger() logr.Logger { return l.Logger(4) }

func (l *logSink) count(substrs ...string) int { return l.Count(substrs...) }

var (
	addr1  = netip.MustParseAddr("172.26.236.177")
	addr2  = netip.MustParseAddr("172.26.236.178")
	addr2b = netip.MustParseAddr("fd00:26:236::178")
	addr3  = netip.MustParseAddr("172.26.236.179")
	spoof  = netip.MustParseAddr("172.26.236.10")
)

// labPeers is node1's view of the lab: node2 dual-stack, node3 IPv4.
func labPeers() map[string][]netip.Addr {
	return map[string][]netip.Addr{
		"node1": {addr1},
		"node2": {addr2, addr2b},
		"node3": {addr3},
	}
}

// testKeys is the keyring of every test node unless a test says otherwise;
// otherKeys is one they do not hold.
var (
	testKeys  = mustKeys("test-key-0123456789abcdef")
	otherKeys = mustKeys("another-key-0123456789abcdef")
)

// mustKeys returns a keyring of the given keys (raw bytes), the first signing.
func mustKeys(keys ...string) *Keyring {
	raw := make([][]byte, len(keys))
	for i, k := range keys {
		raw[i] = []byte(k)
	}
	k, err := NewKeyring(raw...)
	if err != nil {
		panic(err)
	}
	return k
}

// newTestMembers returns node1's Members with default timing, testKeys
// and labPeers.
func newTestMembers(t *testing.T, log *logSink) *Members {
	t.Helper()
	m, err := New(Config{NodeName: "node1", Logger: log.logger(), Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	m.SetPeers(labPeers())
	drain(m)
	return m
}

// hb is a heartbeat of a ready node, sent at now, signed with testKeys.
func hb(now time.Time, name string, inc int64, seq uint64) []byte {
	return encode(nil, message{kind: kindHeartbeat, name: name, incarnation: inc, seq: seq, ready: true, stamp: now.UnixNano()}, testKeys)
}

// hbUnready is a heartbeat of a node that is not ready to own IPs.
func hbUnready(now time.Time, name string, inc int64, seq uint64) []byte {
	return encode(nil, message{kind: kindHeartbeat, name: name, incarnation: inc, seq: seq, stamp: now.UnixNano()}, testKeys)
}

func leave(now time.Time, name string, inc int64, seq uint64) []byte {
	return encode(nil, message{kind: kindLeave, name: name, incarnation: inc, seq: seq, stamp: now.UnixNano()}, testKeys)
}

// drain clears a pending Changed signal and reports whether there was one.
func drain(m *Members) bool {
	select {
	case <-m.Changed():
		return true
	default:
		return false
	}
}

// aliveNames returns Alive as a sorted, comma-separated string.
func aliveNames(m *Members) string {
	var names []string
	for _, n := range []string{"node1", "node2", "node3"} {
		if m.Alive()[n] {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// waitAlive waits until m reports name alive (or dead, per want) and returns how
// long that took. It looks at Alive only at the start and after each Changed
// signal, so a death it sees was announced by Members itself (its expiry timer),
// not provoked by polling. It fails the test after limit.
func waitAlive(t *testing.T, m *Members, name string, want bool, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for range 10_000 {
		if m.Alive()[name] == want {
			return time.Since(start)
		}
		select {
		case <-m.Changed():
		case <-deadline.C:
			t.Fatalf("%s: %s alive=%v not seen within %s (alive: %v)", m.cfg.NodeName, name, want, limit, m.Alive())
		}
	}
	t.Fatalf("%s: too many changes waiting for %s", m.cfg.NodeName, name)
	return 0
}

// runIn runs m.Run(conn) until the returned stop is called (or the test ends);
// stop cancels it, waits for it and returns its error.
func runIn(t *testing.T, m *Members, conn net.PacketConn) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, conn) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				err = errors.New("Run did not return within 5s of cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// stepper returns a func that hands m one datagram from addr2 at time.Now,
// which must count, and checks Alive and whether Changed was signalled.
func stepper(t *testing.T, m *Members) func(pkt []byte, wantAlive string, wantChanged bool) {
	return func(pkt []byte, wantAlive string, wantChanged bool) {
		t.Helper()
		if err := m.handle(time.Now(), pkt, addr2); err != nil {
			t.Fatal(err)
		}
		if got := aliveNames(m); got != wantAlive {
			t.Fatalf("Alive = %s, want %s", got, wantAlive)
		}
		if got := drain(m); got != wantChanged {
			t.Fatalf("Changed signalled = %v, want %v", got, wantChanged)
		}
	}
}
