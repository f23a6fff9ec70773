package announce

import (
	"net/netip"
	"slices"
	"time"
)

// repeatOffsets is when, after an IP becomes owned (or the interface comes
// back up), its gratuitous announcement is sent: at once and twice more, so a
// single lost frame does not leave neighbours pointing at the old owner.
var repeatOffsets = []time.Duration{0, 200 * time.Millisecond, time.Second}

// pending is one scheduled gratuitous announcement.
type pending struct {
	IP      netip.Addr
	At      time.Time
	Attempt int // 1-based, out of len(repeatOffsets)
}

// schedule is the queue of announcements still to send. It is pure (time is
// passed in) and not safe for concurrent use.
type schedule struct {
	queue []pending // sorted by At
}

// add queues the announcements of ip at start+offsets[i] for i >= from,
// replacing any announcements of ip already queued.
func (s *schedule) add(ip netip.Addr, start time.Time, offsets []time.Duration, from int) {
	s.cancel(ip)
	for i := from; i < len(offsets); i++ {
		s.queue = append(s.queue, pending{IP: ip, At: start.Add(offsets[i]), Attempt: i + 1})
	}
	slices.SortStableFunc(s.queue, func(a, b pending) int { return a.At.Compare(b.At) })
}

// cancel drops the queued announcements of ip.
func (s *schedule) cancel(ip netip.Addr) {
	s.queue = slices.DeleteFunc(s.queue, func(p pending) bool { return p.IP == ip })
}

// popDue removes and returns the announcements due at now, oldest first.
func (s *schedule) popDue(now time.Time) []pending {
	n := 0
	for n < len(s.queue) && !s.queue[n].At.After(now) {
		n++
	}
	due := slices.Clone(s.queue[:n])
	s.queue = slices.Delete(s.queue, 0, n)
	return due
}

// next returns when the earliest queued announcement is due.
func (s *schedule) next() (time.Time, bool) {
	if len(s.queue) == 0 {
		return time.Time{}, false
	}
	return s.queue[0].At, true
}
