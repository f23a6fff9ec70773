package members

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// maxReadErrors bounds consecutive failed reads (other than a closed socket)
// before Run gives up: a socket that keeps failing is broken, not busy.
const maxReadErrors = 100

// Run sends a heartbeat to every peer at once and then every Interval, receives
// the peers' heartbeats from conn, and declares a peer dead the moment its
// Timeout runs out. It returns nil when ctx ends, after sending every peer a
// best-effort "leaving" datagram so they stop counting this node at once. It
// returns an error if conn is closed under it or keeps failing to read. A
// failure to send to one peer is logged (once while it lasts) and retried every
// Interval; it never stops Run.
//
// conn is opened by the caller (so that it can be opened inside a network
// namespace), normally with net.ListenUDP on ":Port"; Run does not close it, but
// leaves its read deadline in the past when it returns. Only one Run may be
// active at a time.
func (m *Members) Run(ctx context.Context, conn net.PacketConn) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("members: already running")
	}
	defer m.running.Store(false)
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("members: clear read deadline: %w", err)
	}
	readDone := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		readDone <- m.receive(conn)
	}()
	defer func() {
		// A deadline in the past wakes the reader, which then ends.
		_ = conn.SetReadDeadline(time.Unix(1, 0))
		wg.Wait()
	}()

	m.mu.Lock()
	m.queued = queuedOf(conn)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.queued = nil
		m.mu.Unlock()
	}()
	ticker := time.NewTicker(m.cfg.Interval)
	defer ticker.Stop()
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
	m.broadcast(conn, kindHeartbeat)
	for {
		select {
		case <-ctx.Done():
			m.broadcast(conn, kindLeave)
			return nil
		case err := <-readDone:
			if err == nil {
				err = errors.New("read deadline set by someone else")
			}
			return fmt.Errorf("members: receive: %w", err)
		case <-ticker.C:
			m.broadcast(conn, kindHeartbeat)
		case <-m.sendNow:
			m.broadcast(conn, kindHeartbeat)
		case <-expiry.C:
		case <-m.rearm:
		}
		m.arm(expiry)
	}
}

// queuedRetry is how soon arm looks again when a peer's Timeout ran out while
// datagrams waited unread (see expireLocked).
const queuedRetry = 2 * time.Millisecond

// arm expires what is due and sets t to fire when the next alive peer's Timeout
// runs out (stopped when no peer is alive), or in queuedRetry while an overdue
// peer is spared because datagrams wait unread.
func (m *Members) arm(t *time.Timer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.expireLocked(now)
	next, ok := m.nextExpiryLocked()
	switch {
	case !ok:
		t.Stop()
	case m.overdueLocked(now):
		t.Reset(queuedRetry)
	default:
		t.Reset(max(next.Sub(now), 0))
	}
}

// receive reads datagrams until the read deadline passes (Run is returning: nil)
// or the socket is closed or broken (an error).
func (m *Members) receive(conn net.PacketConn) error {
	buf := make([]byte, maxPacket+1) // one byte more, so an oversized datagram fails to decode
	failures := 0
	var rl rejectLog
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				return nil
			case errors.Is(err, net.ErrClosed):
				return err
			}
			failures++
			if failures >= maxReadErrors {
				return fmt.Errorf("%d reads failed in a row: %w", failures, err)
			}
			m.log.V(2).Info("heartbeat read failed", "err", err)
			continue
		}
		failures = 0
		src, ok := addrOf(from)
		if !ok {
			continue
		}
		if err := m.handle(time.Now(), buf[:n], src); err != nil {
			rl.log(m.log, time.Now(), from, err)
		}
	}
}

// rejectLogEvery is how often at most a reason that points at a broken or
// hostile sender (rejectLog.loud) is logged at level 0; every rejection is
// also logged at V(4) and counted through Config.Rejected.
const rejectLogEvery = time.Minute

// rejectLog rate-limits the log lines of rejected datagrams, per reason. It is
// used by the receiving goroutine only.
type rejectLog struct {
	last   map[string]time.Time
	missed map[string]int
}

// loud reports whether reason is logged at level 0: keys or clocks that
// disagree between nodes (or an attacker) make every such datagram fail, so
// the first must be seen; a duplicate or a node not yet known is routine.
func loud(reason string) bool {
	switch reason {
	case RejectMalformed, RejectUnsigned, RejectBadSignature, RejectStaleTimestamp:
		return true
	}
	return false
}

func (r *rejectLog) log(log klog.Logger, now time.Time, from net.Addr, err error) {
	reason := reasonOf(err)
	if !loud(reason) {
		log.V(4).Info("heartbeat ignored", "from", from, "reason", reason, "err", err)
		return
	}
	if r.last == nil {
		r.last, r.missed = map[string]time.Time{}, map[string]int{}
	}
	if last, ok := r.last[reason]; ok && now.Sub(last) < rejectLogEvery {
		r.missed[reason]++
		log.V(4).Info("heartbeat ignored", "from", from, "reason", reason, "err", err)
		return
	}
	log.Info("heartbeat rejected", "from", from, "reason", reason, "err", err, "alsoRejectedSinceLastLine", r.missed[reason])
	r.last[reason], r.missed[reason] = now, 0
}

// addrOf returns the IP of a UDP source address.
func addrOf(a net.Addr) (netip.Addr, bool) {
	ua, ok := a.(*net.UDPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return ua.AddrPort().Addr().Unmap(), true
}

// target is one peer to send to.
type target struct {
	name string
	addr netip.AddrPort
	src  netip.Addr // invalid: the kernel chooses
}

// broadcast sends one datagram of kind k to every peer's first address, with a
// write deadline of one Interval so a full socket buffer never stalls Run, and
// records per peer whether sending worked.
func (m *Members) broadcast(conn net.PacketConn, k kind) {
	m.mu.Lock()
	m.seq++
	now := time.Now()
	pkt := encode(make([]byte, 0, maxPacket), message{kind: k, name: m.cfg.NodeName, incarnation: m.incarnation, seq: m.seq, ready: m.ready,
		stamp: now.UnixNano()}, m.keys.Load())
	if k == kindHeartbeat {
		m.noteSendLocked(now)
	}
	targets := make([]target, 0, len(m.peers))
	for name, p := range m.peers {
		dst := p.addrs[0]
		targets = append(targets, target{name, netip.AddrPortFrom(dst, uint16(m.cfg.Port)), sourceFor(m.self, dst)})
	}
	m.mu.Unlock()
	sort.Slice(targets, func(i, j int) bool { return targets[i].name < targets[j].name })

	_ = conn.SetWriteDeadline(time.Now().Add(m.cfg.Interval))
	errs := make([]error, len(targets))
	for i, t := range targets {
		errs[i] = send(conn, pkt, t.addr, t.src)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	for i, t := range targets {
		p := m.peers[t.name]
		if p == nil {
			continue // removed meanwhile
		}
		msg := ""
		if errs[i] != nil {
			msg = errs[i].Error()
		}
		if msg == p.sendErr {
			continue
		}
		if msg != "" {
			m.log.Info("heartbeat send failed", "node", t.name, "addr", t.addr, "err", errs[i])
		} else {
			m.log.Info("heartbeat send works again", "node", t.name, "addr", t.addr)
		}
		p.sendErr = msg
	}
}
