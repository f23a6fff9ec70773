package controller

import (
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/model"
)

// TestBackoff: retries double from backoffBase up to backoffMax, stop after
// maxAttempts failures, and start over after forget or reset.
func TestBackoff(t *testing.T) {
	b := newBackoff()
	k := model.ServiceKey{Namespace: "ns1", Name: "web"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if ok, _ := b.due(k, now); !ok {
		t.Fatal("a Service that never failed is not due")
	}
	var delays []time.Duration
	for i := 1; i < maxAttempts; i++ {
		at := b.failed(k, now)
		delays = append(delays, at.Sub(now))
		if ok, when := b.due(k, now); ok || !when.Equal(at) {
			t.Fatalf("after failure %d: due %v at %v, want not due until %v", i, ok, when, at)
		}
		if ok, _ := b.due(k, at); !ok {
			t.Fatalf("after failure %d: not due at %v", i, at)
		}
	}
	for i, d := range delays {
		want := min(backoffBase<<i, backoffMax)
		if d != want {
			t.Errorf("delay after failure %d = %v, want %v (all: %v)", i+1, d, want, delays)
		}
	}
	if at := b.failed(k, now); !at.IsZero() {
		t.Errorf("failure %d: retry at %v, want none (given up)", maxAttempts, at)
	}
	if ok, at := b.due(k, now.Add(24*time.Hour)); ok || !at.IsZero() {
		t.Errorf("given up: due %v at %v, want never until reset", ok, at)
	}
	if b.failures(k) != maxAttempts {
		t.Errorf("failures %d, want %d", b.failures(k), maxAttempts)
	}
	b.reset()
	if ok, _ := b.due(k, now); !ok || b.failures(k) != 0 {
		t.Error("reset: still backing off")
	}
	b.failed(k, now)
	b.forget(k)
	if ok, _ := b.due(k, now); !ok {
		t.Error("forget: still backing off")
	}
}

func TestEarliest(t *testing.T) {
	a := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := a.Add(time.Second)
	for _, tc := range []struct{ x, y, want time.Time }{
		{a, b, a}, {b, a, a}, {time.Time{}, b, b}, {a, time.Time{}, a}, {time.Time{}, time.Time{}, time.Time{}},
	} {
		if got := earliest(tc.x, tc.y); !got.Equal(tc.want) {
			t.Errorf("earliest(%v, %v) = %v, want %v", tc.x, tc.y, got, tc.want)
		}
	}
}
