package nftrace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/nft/netlink"
)

// Collection bounds.
const (
	// DefaultMax is the number of events Collect stops at when given no max.
	DefaultMax = 10000
	// DefaultQuiet is the quiet period Collect uses when given none.
	DefaultQuiet = 200 * time.Millisecond
	// DefaultWindow bounds a Collect whose context has no deadline.
	DefaultWindow = time.Minute
	// pollSlice is the longest Collect blocks without looking at its context.
	pollSlice = 100 * time.Millisecond
	// rcvBuf is the receive buffer of a trace listener: a traced TCP
	// handshake through a svcnet table is a few dozen events of ~250 bytes.
	rcvBuf = 8 << 20
)

// ErrOverrun reports trace events the kernel dropped because the listener's
// receive buffer was full (ENOBUFS): the collected sequence has holes.
var ErrOverrun = errors.New("nftrace events lost: receive buffer overrun")

// Listener receives the nf_tables trace events of one network namespace: a
// netlink.TraceSocket (NETLINK_NETFILTER, created in the namespace, joined to
// the NFNLGRP_NFTRACE multicast group) with an 8 MiB receive buffer. Events are
// queued in the socket from Listen on, so create the Listener before sending
// the probe.
//
// The kernel builds trace events only while some socket of the namespace is
// subscribed to the group (nfnetlink_has_listeners), and for every packet of
// the namespace that has nftrace set, whoever set it: the events of other
// tracers' packets are received too.
//
// Contract: a Listener is not for concurrent use; Close waits for a running
// Collect to end (cancel its context first to end it early).
type Listener struct {
	mu     sync.Mutex
	sock   *netlink.TraceSocket
	ns     *netns.NS // own handle, for interface names
	names  map[uint32]string
	closed bool
}

// Listen subscribes to the trace events of ns.
func Listen(ns *netns.NS) (*Listener, error) { return newListener(ns, rcvBuf) }

// newListener is Listen with a receive buffer of buf bytes.
func newListener(ns *netns.NS, buf int) (*Listener, error) {
	if ns == nil {
		return nil, errors.New("nftrace listener: no network namespace given")
	}
	own, err := netns.OpenPath(ns.Path())
	if err != nil {
		return nil, fmt.Errorf("nftrace listener: %w", err)
	}
	sock, err := netlink.ListenTrace(own, buf)
	if err != nil {
		own.Close()
		return nil, fmt.Errorf("nftrace listener: %w", err)
	}
	return &Listener{sock: sock, ns: own, names: map[uint32]string{}}, nil
}

// Collect reads events in the order the kernel sent them until ctx ends
// (error: ctx's, with the events read so far), or no event came for quiet
// after at least one did, or maxEvents were read (nil error in both cases).
// quiet ≤ 0 means DefaultQuiet, maxEvents ≤ 0 DefaultMax; a ctx without deadline
// is bounded by DefaultWindow. Events past maxEvents stay queued for the next
// Collect (the kernel sends each event in a datagram of its own). A receive buffer overrun ends it with ErrOverrun. Interface names
// are resolved in the namespace, best effort.
func (l *Listener) Collect(ctx context.Context, quiet time.Duration, maxEvents int) ([]Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("collect nftrace events: listener closed")
	}
	if quiet <= 0 {
		quiet = DefaultQuiet
	}
	if maxEvents <= 0 {
		maxEvents = DefaultMax
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWindow)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	var evs []Event
	var last time.Time
	for len(evs) < maxEvents {
		if err := ctx.Err(); err != nil {
			return l.named(evs), fmt.Errorf("collect nftrace events: %w", err)
		}
		wait := min(time.Until(deadline), pollSlice)
		if len(evs) > 0 {
			q := quiet - time.Since(last)
			if q <= 0 {
				break
			}
			wait = min(wait, q)
		}
		got, err := l.receive(max(wait, time.Millisecond), maxEvents-len(evs))
		evs = append(evs, got...)
		if len(got) > 0 {
			last = time.Now()
		}
		if err != nil {
			return l.named(evs), fmt.Errorf("collect nftrace events: %w", err)
		}
	}
	return l.named(evs), nil
}

// receive waits up to wait for one datagram and returns its trace events (at
// most n).
func (l *Listener) receive(wait time.Duration, n int) ([]Event, error) {
	msgs, err := l.sock.Receive(wait)
	if errors.Is(err, unix.ENOBUFS) {
		return nil, ErrOverrun
	}
	if err != nil {
		return nil, err
	}
	return parseEvents(msgs, n)
}

// parseDatagram returns the trace events (at most n) of one datagram from
// the kernel, skipping messages of other types.
func parseDatagram(b []byte, n int) ([]Event, error) {
	msgs, err := netlink.TraceMessages(b)
	if err != nil {
		return nil, err
	}
	return parseEvents(msgs, n)
}

// parseEvents decodes at most n trace messages.
func parseEvents(msgs []netlink.TraceMsg, n int) ([]Event, error) {
	var out []Event
	for _, m := range msgs[:min(n, len(msgs))] {
		e, err := parseEvent(m)
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// named fills the interface names of evs from a cache, resolving the
// indexes it lacks in one visit to the namespace.
func (l *Listener) named(evs []Event) []Event {
	var missing []uint32
	for _, e := range evs {
		for _, i := range []uint32{e.Iif, e.Oif} {
			if _, ok := l.names[i]; !ok && i != 0 && !slices.Contains(missing, i) {
				missing = append(missing, i)
			}
		}
	}
	if len(missing) > 0 {
		_ = l.ns.Do(func() error {
			for _, i := range missing {
				l.names[i] = "" // unknown (gone): not asked again
				if ifi, err := net.InterfaceByIndex(int(i)); err == nil {
					l.names[i] = ifi.Name
				}
			}
			return nil
		})
	}
	for k := range evs {
		evs[k].IifName, evs[k].OifName = l.names[evs[k].Iif], l.names[evs[k].Oif]
	}
	return evs
}

// Close unsubscribes and releases the socket; it is idempotent.
func (l *Listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.sock.Close()
	if cerr := l.ns.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close nftrace listener: %w", err)
	}
	return nil
}
