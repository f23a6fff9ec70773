package announce

import (
	"net/netip"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a, b := netip.MustParseAddr("172.26.236.180"), netip.MustParseAddr("fd00:26:236::b4")
	var s schedule
	if _, ok := s.next(); ok {
		t.Fatal("empty schedule has a next announcement")
	}
	// a becomes owned at t0 (first attempt sent by the caller), b at t0+100ms.
	s.add(a, t0, repeatOffsets, 1)
	s.add(b, t0.Add(100*time.Millisecond), repeatOffsets, 0)
	type step struct {
		at   time.Duration
		want []pending
	}
	steps := []step{
		{0, nil},
		{100 * time.Millisecond, []pending{{b, t0.Add(100 * time.Millisecond), 1}}},
		{250 * time.Millisecond, []pending{{a, t0.Add(200 * time.Millisecond), 2}}},
		{299 * time.Millisecond, nil},
		{2 * time.Second, []pending{{b, t0.Add(300 * time.Millisecond), 2}, {a, t0.Add(time.Second), 3}, {b, t0.Add(1100 * time.Millisecond), 3}}},
	}
	for _, st := range steps {
		got := s.popDue(t0.Add(st.at))
		if len(got) != len(st.want) {
			t.Fatalf("at +%v: due %v, want %v", st.at, got, st.want)
		}
		for i := range got {
			if got[i] != st.want[i] {
				t.Errorf("at +%v: due[%d] = %v, want %v", st.at, i, got[i], st.want[i])
			}
		}
	}
	if _, ok := s.next(); ok {
		t.Errorf("schedule not drained: %v", s.queue)
	}
}

func TestScheduleCancelAndReplace(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a, b := netip.MustParseAddr("172.26.236.180"), netip.MustParseAddr("172.26.236.181")
	var s schedule
	s.add(a, t0, repeatOffsets, 0)
	s.add(b, t0, repeatOffsets, 0)
	s.cancel(a)
	for _, p := range s.queue {
		if p.IP == a {
			t.Fatalf("cancelled %s still queued: %v", a, s.queue)
		}
	}
	// Re-adding restarts the schedule rather than doubling it.
	s.add(b, t0.Add(time.Minute), repeatOffsets, 0)
	if len(s.queue) != len(repeatOffsets) {
		t.Fatalf("queue %v, want one run of %d", s.queue, len(repeatOffsets))
	}
	if next, _ := s.next(); !next.Equal(t0.Add(time.Minute)) {
		t.Errorf("next %v, want %v", next, t0.Add(time.Minute))
	}
}
