package controller

import (
	"time"

	"github.com/svcnet/svcnet/internal/model"
)

// Write retry policy: the first retry after backoffBase, doubling up to
// backoffMax; after maxAttempts failures a Service is left alone until it
// changes or the next periodic resync.
const (
	backoffBase = time.Second
	backoffMax  = 2 * time.Minute
	maxAttempts = 10
)

// backoff tracks failed status writes per Service. Not safe for concurrent use.
type backoff struct {
	entries map[model.ServiceKey]*backoffEntry
}

type backoffEntry struct {
	failures int
	next     time.Time // zero once given up
}

func newBackoff() *backoff { return &backoff{entries: map[model.ServiceKey]*backoffEntry{}} }

// due reports whether a write of key may be tried at now. When not, at is when
// it may (zero when it gave up until reset).
func (b *backoff) due(key model.ServiceKey, now time.Time) (ok bool, at time.Time) {
	e := b.entries[key]
	switch {
	case e == nil:
		return true, time.Time{}
	case e.next.IsZero():
		return false, time.Time{}
	case now.Before(e.next):
		return false, e.next
	}
	return true, time.Time{}
}

// failed records a failed write of key at now and returns when to retry (zero
// when the attempts are used up).
func (b *backoff) failed(key model.ServiceKey, now time.Time) time.Time {
	e := b.entries[key]
	if e == nil {
		e = &backoffEntry{}
		b.entries[key] = e
	}
	e.failures++
	if e.failures >= maxAttempts {
		e.next = time.Time{}
		return e.next
	}
	d := backoffBase << (e.failures - 1)
	if d > backoffMax || d <= 0 {
		d = backoffMax
	}
	e.next = now.Add(d)
	return e.next
}

// failures returns how many writes of key failed in a row.
func (b *backoff) failures(key model.ServiceKey) int {
	if e := b.entries[key]; e != nil {
		return e.failures
	}
	return 0
}

// forget resets key (a write succeeded, was not needed, or the Service changed).
func (b *backoff) forget(key model.ServiceKey) { delete(b.entries, key) }

// reset forgets every key.
func (b *backoff) reset() { clear(b.entries) }
