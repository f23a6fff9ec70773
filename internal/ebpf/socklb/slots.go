package socklb

import (
	"fmt"
	"math"
)

// slots allocates contiguous ranges of backend slots (keys of the backends
// map) for Services: a Service's backends are slots base..base+count-1.
// A change to a Service writes its backends into a fresh range before the
// services entry points to it, so a connect never sees a half-written set.
// Ranges are handed out from a cursor over the 32-bit slot space and never
// overlap a live range. Until the cursor first wraps, every live range lies
// below it and an allocation is O(1); after that (2^32 slots handed out) each
// allocation scans the live ranges. The zero value is ready.
type slots struct {
	next    uint32
	wrapped bool
	live    map[uint32]uint32 // base -> count
}

// alloc returns the base of a free range of n > 0 slots.
func (s *slots) alloc(n uint32) (uint32, error) {
	if n == 0 {
		return 0, fmt.Errorf("allocate 0 backend slots")
	}
	if s.live == nil {
		s.live = map[uint32]uint32{}
	}
	// Each failed try moves the cursor past one live range or wraps it once,
	// so len(live)+2 tries find a gap whenever the space has one of size n.
	for range len(s.live) + 2 {
		if uint64(s.next)+uint64(n) > math.MaxUint32+1 {
			s.next, s.wrapped = 0, true
			continue
		}
		end, clash := uint64(0), false
		if s.wrapped {
			end, clash = s.overlap(s.next, n)
		}
		if !clash {
			base := s.next
			s.live[base] = n
			s.next = uint32((uint64(base) + uint64(n)) % (math.MaxUint32 + 1))
			return base, nil
		}
		s.next = uint32(end % (math.MaxUint32 + 1))
	}
	return 0, fmt.Errorf("allocate %d backend slots: no free range", n)
}

// overlap reports whether [base, base+n) overlaps a live range, and if so the
// end of that range.
func (s *slots) overlap(base, n uint32) (uint64, bool) {
	lo, hi := uint64(base), uint64(base)+uint64(n)
	for b, c := range s.live {
		if uint64(b) < hi && lo < uint64(b)+uint64(c) {
			return uint64(b) + uint64(c), true
		}
	}
	return 0, false
}

// free releases the range at base.
func (s *slots) free(base uint32) { delete(s.live, base) }

// adopt marks the range of n slots at base live, as an earlier allocator
// left it (a load balancer adopting pinned maps); cursorAfter must follow.
func (s *slots) adopt(base, n uint32) {
	if s.live == nil {
		s.live = map[uint32]uint32{}
	}
	s.live[base] = n
}

// cursorAfter puts the cursor at end, the end of the highest adopted range,
// so that every live range lies below it; an end at the top of the slot
// space wraps it, and allocations then scan the live ranges.
func (s *slots) cursorAfter(end uint64) {
	if end > math.MaxUint32 {
		s.next, s.wrapped = 0, true
		return
	}
	s.next = uint32(end)
}
