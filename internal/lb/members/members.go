package members

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Defaults of Config.
const (
	DefaultPort     = 7947
	DefaultInterval = 100 * time.Millisecond
	// DefaultTimeout is 4×DefaultInterval: three heartbeats in a row may be lost.
	DefaultTimeout = 4 * DefaultInterval
	// DefaultStampWindow is how far a signed heartbeat's timestamp may be from
	// the receiver's clock, either way: room for clocks that NTP keeps
	// within milliseconds, or that disagree by a second or two, while a
	// recorded heartbeat stops counting seconds after it was sent.
	DefaultStampWindow = 5 * time.Second
	// restartGraceTimeouts is RestartGrace's default in Timeouts (4 s at the
	// default Timeout): room for a restarted agent's first sync and the
	// speaker's warm-up of 3 Timeouts.
	restartGraceTimeouts = 10
)

// Config configures Members.
type Config struct {
	// NodeName is this node (1..253 bytes). Required.
	NodeName string
	// Port is the UDP port every speaker listens on and sends to; zero means
	// DefaultPort. The caller opens the socket for Run (ListenUDP(":Port")).
	Port int
	// Interval is the time between heartbeats; zero means DefaultInterval.
	Interval time.Duration
	// Timeout is how long a peer stays alive after its last heartbeat; zero
	// means 4×Interval. It must be at least 3×Interval.
	Timeout time.Duration
	// Logger gets a line whenever a peer becomes alive, restarts or dies, and
	// when sending to a peer starts or stops failing. The zero value means
	// klog.Background().
	Logger klog.Logger
	// Keys sign every heartbeat this node sends (the first key) and verify
	// every one it receives (any key). Required unless Insecure; SetKeys
	// replaces them while running.
	Keys *Keyring
	// Insecure runs without keys: heartbeats are sent and accepted unsigned
	// (wire version 1), so any host that can send to Port with a node's
	// source address can make that node alive or dead. Keys must be nil.
	Insecure bool
	// StampWindow is how far a signed heartbeat's timestamp may be from this
	// node's clock, either way; zero means DefaultStampWindow. Node clocks
	// must agree within it.
	StampWindow time.Duration
	// Rejected, when set, is called with the reason (one of RejectReasons)
	// for every received datagram that does not count. It must not block.
	Rejected func(reason string)
	// RestartGrace is how long a peer that restarted while alive (a new
	// incarnation heard before the old one's Timeout ran out) keeps counting
	// alive, not yet ready, while it warms up; zero means 10×Timeout. Its
	// IPs stay with it meanwhile, so flows established through them survive
	// an agent restart (the node's data plane kept serving them); a peer
	// still not ready when the grace ends is dropped.
	RestartGrace time.Duration
}

// Reasons a received datagram does not count (Config.Rejected).
const (
	// RejectMalformed: not a heartbeat of a version this node speaks.
	RejectMalformed = "malformed"
	// RejectUnsigned: an unsigned (version 1) heartbeat at a node with keys.
	RejectUnsigned = "unsigned"
	// RejectBadSignature: signed, but by no key this node holds, or altered.
	RejectBadSignature = "bad-signature"
	// RejectUnknownPeer: it names no peer, or this node.
	RejectUnknownPeer = "unknown-peer"
	// RejectWrongSource: its source is not an address of the node it names.
	RejectWrongSource = "wrong-source"
	// RejectStaleTimestamp: its timestamp is outside StampWindow of this
	// node's clock (a recording replayed later, or a clock that is off).
	RejectStaleTimestamp = "stale-timestamp"
	// RejectReplayed: not newer than what was heard from the peer (its
	// incarnation and sequence do not advance): a replay, a duplicate, or
	// one the network reordered.
	RejectReplayed = "replayed"
)

// RejectReasons lists every reason Config.Rejected is called with.
var RejectReasons = []string{RejectMalformed, RejectUnsigned, RejectBadSignature, RejectUnknownPeer,
	RejectWrongSource, RejectStaleTimestamp, RejectReplayed}

// Errors for heartbeats that are not counted, besides decode's.
var (
	errUnknownPeer = errors.New("unknown peer")
	errWrongSource = errors.New("source is not an address of the node it names")
	errStaleStamp  = errors.New("timestamp outside the window")
	errStale       = errors.New("stale heartbeat")
)

// reasonOf maps an error of handle to its RejectReasons entry.
func reasonOf(err error) string {
	for _, r := range []struct {
		err    error
		reason string
	}{
		{errUnsigned, RejectUnsigned},
		{errBadSignature, RejectBadSignature},
		{errUnknownPeer, RejectUnknownPeer},
		{errWrongSource, RejectWrongSource},
		{errStaleStamp, RejectStaleTimestamp},
		{errStale, RejectReplayed},
	} {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return RejectMalformed
}

// Members tracks which peers are alive. New starts nothing; Run sends and
// receives. SetPeers, Alive, Changed and Timeout are safe to call from any
// goroutine at any time.
type Members struct {
	cfg         Config
	log         klog.Logger
	incarnation int64
	changed     chan struct{}
	rearm       chan struct{} // tells Run to recompute its expiry timer
	sendNow     chan struct{} // tells Run to send a heartbeat at once
	running     atomic.Bool
	keys        atomic.Pointer[Keyring] // nil when Insecure

	mu       sync.Mutex
	peers    map[string]*peer
	self     []netip.Addr // this node's addresses: heartbeats are sent from them
	seq      uint64       // last sequence number sent
	ready    bool         // this node is ready to own IPs (SetReady)
	lastSent time.Time    // when the last heartbeat was sent (zero before the first)
	rejoins  uint64       // see Rejoins
	// queued, set while Run runs, reports whether datagrams wait unread
	// in its socket (see expireLocked); nil when it cannot tell.
	queued func() bool
	// sparedSince is when overdue peers were first spared because
	// datagrams waited unread; zero when none is overdue.
	sparedSince time.Time
}

// peer is what this node knows of one other node.
type peer struct {
	addrs       []netip.Addr // heartbeats go to addrs[0]; are accepted from any
	incarnation int64
	seq         uint64
	lastHeard   time.Time
	heard       bool // heard within Timeout
	ready       bool // its last heartbeat said it is ready to own IPs
	left        bool // incarnation said it was leaving
	// graceUntil, when set, is when the RestartGrace of a peer that restarted
	// while alive ends; until then (or until it is ready) it counts alive.
	graceUntil time.Time
	sendErr    string // the last error sending to it, "" when the last send worked
}

// alive is what Alive reports: heard within Timeout, and ready or within the
// grace of a restart (expireLocked ends graces on time).
func (p *peer) alive() bool { return p.heard && (p.ready || !p.graceUntil.IsZero()) }

// New checks cfg and fills its defaults. It binds nothing and starts no goroutine.
// The incarnation is the current time in nanoseconds.
func New(cfg Config) (*Members, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("members: no node name")
	}
	if len(cfg.NodeName) > maxNameLen {
		return nil, fmt.Errorf("members: node name %.20q...: longer than %d bytes", cfg.NodeName, maxNameLen)
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("members: port %d out of range", cfg.Port)
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("members: negative interval %s or timeout %s", cfg.Interval, cfg.Timeout)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 4 * cfg.Interval
	}
	if cfg.Timeout < 3*cfg.Interval {
		return nil, fmt.Errorf("members: timeout %s is less than 3×interval %s", cfg.Timeout, cfg.Interval)
	}
	switch {
	case cfg.Keys == nil && !cfg.Insecure:
		return nil, errors.New("members: no keys: heartbeats must be signed (or Insecure set)")
	case cfg.Keys != nil && cfg.Insecure:
		return nil, errors.New("members: keys given with Insecure")
	}
	if cfg.StampWindow < 0 {
		return nil, fmt.Errorf("members: negative stamp window %s", cfg.StampWindow)
	}
	if cfg.StampWindow == 0 {
		cfg.StampWindow = DefaultStampWindow
	}
	if cfg.RestartGrace < 0 {
		return nil, fmt.Errorf("members: negative restart grace %s", cfg.RestartGrace)
	}
	if cfg.RestartGrace == 0 {
		cfg.RestartGrace = restartGraceTimeouts * cfg.Timeout
	}
	log := cfg.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	m := &Members{
		cfg:         cfg,
		log:         log,
		incarnation: time.Now().UnixNano(),
		changed:     make(chan struct{}, 1),
		rearm:       make(chan struct{}, 1),
		sendNow:     make(chan struct{}, 1),
		peers:       map[string]*peer{},
	}
	m.keys.Store(cfg.Keys)
	return m, nil
}

// SetKeys replaces the keys heartbeats are signed and verified with, from the
// next datagram on (a rotation: see Keyring). It fails for a Members made
// Insecure, and for nil keys.
func (m *Members) SetKeys(keys *Keyring) error {
	if m.cfg.Insecure {
		return errors.New("members: insecure: no keys to replace")
	}
	if keys == nil {
		return errors.New("members: nil keys")
	}
	m.keys.Store(keys)
	return nil
}

// Timeout returns the configured Timeout (after defaults).
func (m *Members) Timeout() time.Duration { return m.cfg.Timeout }

// Interval returns the configured Interval (after defaults).
func (m *Members) Interval() time.Duration { return m.cfg.Interval }

// Changed is signalled (capacity 1, never blocking the sender) whenever the set
// Alive returns changes. A receiver should call Alive after every signal.
func (m *Members) Changed() <-chan struct{} { return m.changed }

// SetReady says whether this node is ready to own IPs; heartbeats carry it, and
// peers count this node alive only while it is. It starts false: a speaker sets
// it once it has warmed up (heard its peers), so that peers keep the IPs they
// answer for until this node can take them, and clears it when it stops. A
// change is sent to every peer at once (while Run runs), not at the next Interval.
func (m *Members) SetReady(ready bool) {
	m.mu.Lock()
	changed := m.ready != ready
	m.ready = ready
	m.mu.Unlock()
	if changed {
		select {
		case m.sendNow <- struct{}{}:
		default:
		}
	}
}

// Ready reports what SetReady last set: whether this node tells its peers it
// is ready to own IPs.
func (m *Members) Ready() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready
}

// SetPeers replaces the set of peers: node name -> its addresses, the one to send
// to first. Names without a valid address are ignored. This node's own entry is
// not a peer; its addresses, when given, are the sources heartbeats are sent
// from (the first of the destination's family), because the kernel's own choice
// on a node with several addresses in one subnet (always possible with IPv6)
// may not be the address peers accept. A peer that stays keeps its liveness;
// one that goes is no longer alive (and Changed is signalled if it was); a new
// one is dead until heard from.
func (m *Members) SetPeers(peers map[string][]netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.self = cleanAddrs(peers[m.cfg.NodeName])
	changed := false
	for name, p := range m.peers {
		if _, ok := peers[name]; !ok {
			changed = changed || p.alive()
			delete(m.peers, name)
		}
	}
	for name, addrs := range peers {
		if name == m.cfg.NodeName {
			continue
		}
		clean := cleanAddrs(addrs)
		if len(clean) == 0 {
			if p := m.peers[name]; p != nil {
				changed = changed || p.alive()
				delete(m.peers, name)
			}
			continue
		}
		if p := m.peers[name]; p != nil {
			p.addrs = clean
			continue
		}
		m.peers[name] = &peer{addrs: clean}
	}
	if changed {
		m.signal()
	}
}

// cleanAddrs returns the valid addresses, unmapped, without duplicates, in order.
func cleanAddrs(addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// Rejoins counts the times this node sent no heartbeat for Timeout or more
// (its process stalled: stopped, paused, starved) and then sent again: its
// peers may have declared it dead meanwhile and taken its IPs, while to this
// node nothing seemed to change. Changed is signalled when it grows.
func (m *Members) Rejoins() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rejoins
}

// noteSendLocked records a heartbeat sent at now, counting a rejoin when the
// last one was Timeout or more before. m.mu must be held.
func (m *Members) noteSendLocked(now time.Time) {
	if gap := now.Sub(m.lastSent); !m.lastSent.IsZero() && gap >= m.cfg.Timeout {
		m.rejoins++
		m.log.Info("this node sent no heartbeat for a Timeout or more: peers may have taken its IPs", "silentFor", gap.Round(time.Millisecond))
		m.signal()
	}
	m.lastSent = now
}

// Alive returns the peers heard from within Timeout whose last heartbeat said
// they are ready to own IPs, plus this node (always alive, ready or not), each
// mapped to true. A peer whose Timeout ran out is declared dead here too (and
// Changed signalled), so what Alive returns never lags the clock.
func (m *Members) Alive() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(time.Now())
	out := map[string]bool{m.cfg.NodeName: true}
	for name, p := range m.peers {
		if p.alive() {
			out[name] = true
		}
	}
	return out
}

// handle applies one received datagram from src at time now. It returns nil when
// the datagram counted, else why not, which it also reports to Config.Rejected.
func (m *Members) handle(now time.Time, b []byte, src netip.Addr) error {
	err := m.accept(now, b, src)
	if err != nil && m.cfg.Rejected != nil {
		m.cfg.Rejected(reasonOf(err))
	}
	return err
}

// accept is handle without the report. A datagram counts when, in this order,
// it decodes and its MAC verifies (or it is unsigned and m Insecure), it names
// a peer and comes from one of its addresses, its timestamp is within
// StampWindow of now (signed only), and it is fresh.
func (m *Members) accept(now time.Time, b []byte, src netip.Addr) error {
	keys := m.keys.Load()
	msg, err := decode(b, keys)
	if err != nil {
		return err
	}
	src = src.Unmap()
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.peers[msg.name]
	if p == nil {
		return fmt.Errorf("heartbeat from %s naming %q: %w", src, msg.name, errUnknownPeer)
	}
	if !slices.Contains(p.addrs, src) {
		return fmt.Errorf("heartbeat from %s naming %q: %w", src, msg.name, errWrongSource)
	}
	if keys != nil {
		if skew := now.Sub(time.Unix(0, msg.stamp)); skew > m.cfg.StampWindow || skew < -m.cfg.StampWindow {
			return fmt.Errorf("heartbeat from %q sent at %s, %s from this node's clock: %w (%s)",
				msg.name, time.Unix(0, msg.stamp).UTC().Format(time.RFC3339Nano), skew.Round(time.Millisecond), errStaleStamp, m.cfg.StampWindow)
		}
	}
	m.expireLocked(now)
	if !m.fresh(p, msg) {
		return fmt.Errorf("heartbeat from %q incarnation %d seq %d: %w", msg.name, msg.incarnation, msg.seq, errStale)
	}
	was := p.alive()
	restarted := p.incarnation != 0 && msg.incarnation != p.incarnation
	p.incarnation, p.seq = msg.incarnation, msg.seq
	switch {
	case msg.kind == kindLeave:
		p.left, p.graceUntil = true, time.Time{}
		if p.heard {
			p.heard = false
			m.log.Info("peer dead", "node", msg.name, "reason", "left", "incarnation", msg.incarnation)
		}
	case !p.heard:
		p.left, p.heard, p.ready, p.lastHeard, p.graceUntil = false, true, msg.ready, now, time.Time{}
		m.log.Info("peer alive", "node", msg.name, "addr", src, "ready", msg.ready, "incarnation", msg.incarnation)
		m.kick()
	default:
		switch {
		case msg.ready:
			p.graceUntil = time.Time{}
		case restarted && was:
			// Restarted before its Timeout ran out (its agent was killed and
			// restarted at once): it keeps its IPs while it warms up.
			p.graceUntil = now.Add(m.cfg.RestartGrace)
			m.kick()
		}
		if restarted {
			m.log.Info("peer restarted", "node", msg.name, "ready", msg.ready, "incarnation", msg.incarnation,
				"keepsIPsFor", p.graceUntil.Sub(now).Round(time.Millisecond))
		} else if p.ready != msg.ready {
			m.log.Info("peer readiness changed", "node", msg.name, "ready", msg.ready)
		}
		p.ready, p.lastHeard = msg.ready, now
	}
	if p.alive() != was {
		m.signal()
	}
	return nil
}

// fresh reports whether msg is newer than what p knows. While p is heard only a
// newer incarnation, or a higher sequence of the same one, counts. When p is dead
// any other incarnation counts (a restart, even with a clock that stepped back),
// but never the one that said it was leaving, nor an old sequence of the last one.
func (m *Members) fresh(p *peer, msg message) bool {
	same := msg.incarnation == p.incarnation
	if p.heard {
		return msg.incarnation > p.incarnation || (same && msg.seq > p.seq)
	}
	if !same {
		return true
	}
	return !p.left && msg.seq > p.seq
}

// expireLocked declares dead every peer not heard from within Timeout of now,
// ends every restart grace that ran out, and signals Changed if a peer that
// was alive is not any more. m.mu must be held.
//
// While datagrams wait unread in this node's socket (m.queued), overdue
// peers are spared, for Interval at most from when that began: when this
// process was stalled (descheduled on a busy machine, or paused), its clock
// ran on while the peers' heartbeats queued up, and the expiry must not win
// the race against reading them. The bound keeps a sender flooding the
// port from keeping a dead peer alive longer.
func (m *Members) expireLocked(now time.Time) {
	changed := false
	spare := false
	switch {
	case !m.overdueLocked(now):
		m.sparedSince = time.Time{}
	case m.queued != nil && m.queued():
		if m.sparedSince.IsZero() {
			m.sparedSince = now
		}
		spare = now.Sub(m.sparedSince) < m.cfg.Interval
	}
	for name, p := range m.peers {
		if p.heard && now.Sub(p.lastHeard) >= m.cfg.Timeout && !spare {
			changed = changed || p.alive()
			p.heard, p.graceUntil = false, time.Time{}
			m.log.Info("peer dead", "node", name, "reason", "timeout", "silentFor", now.Sub(p.lastHeard).Round(time.Millisecond), "incarnation", p.incarnation)
		}
		if !p.graceUntil.IsZero() && !now.Before(p.graceUntil) {
			changed = changed || (p.alive() && !p.ready)
			p.graceUntil = time.Time{}
			m.log.Info("peer not ready after its restart grace: its IPs move", "node", name, "grace", m.cfg.RestartGrace, "incarnation", p.incarnation)
		}
	}
	if changed {
		m.signal()
	}
}

// overdueLocked reports whether a heard peer's Timeout has run out at now.
// m.mu must be held.
func (m *Members) overdueLocked(now time.Time) bool {
	for _, p := range m.peers {
		if p.heard && now.Sub(p.lastHeard) >= m.cfg.Timeout {
			return true
		}
	}
	return false
}

// nextExpiryLocked returns when the first heard peer's Timeout runs out; false
// when no peer is heard. m.mu must be held.
func (m *Members) nextExpiryLocked() (time.Time, bool) {
	var next time.Time
	ok := false
	for _, p := range m.peers {
		if !p.heard {
			continue
		}
		if t := p.lastHeard.Add(m.cfg.Timeout); !ok || t.Before(next) {
			next, ok = t, true
		}
		if t := p.graceUntil; !t.IsZero() && t.Before(next) {
			next = t
		}
	}
	return next, ok
}

func (m *Members) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

func (m *Members) kick() {
	select {
	case m.rearm <- struct{}{}:
	default:
	}
}
