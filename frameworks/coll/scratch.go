package coll

import (
	"slices"

	"github.com/gompi/gompi/release"
)

// Scratch lends algorithms temporary buffers that live with a communicator
// (Args.Scratch): a collective called in a loop reuses them instead of
// allocating afresh each call. Fresh memory is what made large collectives
// slow: a new 512 KiB buffer is new pages for the kernel to fault in when a
// single-copy read fills it, and garbage for the collector; reused, the
// same pages stay mapped and often cached. A nil Scratch allocates.
//
// Buffers up to Keep bytes in all are kept between calls
// (coll_base_scratch_keep); larger ones are left to the garbage collector,
// so that one huge collective does not pin its memory for the
// communicator's life.
type Scratch struct {
	Keep int

	// mu: a release.Mutex, whose Unlock is a plain store: a reduction
	// takes and gives back a buffer every call, and sync.Mutex's unlock is
	// a locked instruction that waits for the reduction's stores.
	mu   release.Mutex
	free [][]byte
	kept int // bytes held in free
}

// Get returns a buffer of n bytes, its contents undefined.
func (s *Scratch) Get(n int) []byte {
	if s != nil {
		s.mu.Lock()
		best := -1
		for i, b := range s.free {
			if cap(b) >= n && (best < 0 || cap(b) < cap(s.free[best])) {
				best = i
			}
		}
		if best >= 0 {
			b := s.free[best]
			s.free = slices.Delete(s.free, best, best+1)
			s.kept -= cap(b)
			s.mu.Unlock()
			return b[:n]
		}
		s.mu.Unlock()
	}
	return make([]byte, n)
}

// Put gives buffers from Get back. The caller must not use them after.
func (s *Scratch) Put(bufs ...[]byte) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bufs {
		if cap(b) == 0 {
			continue
		}
		if s.kept+cap(b) > s.Keep {
			// Make room by dropping smaller buffers: the large one is what
			// the communicator's heavy collectives need.
			slices.SortFunc(s.free, func(x, y []byte) int { return cap(x) - cap(y) })
			for len(s.free) > 0 && s.kept+cap(b) > s.Keep && cap(s.free[0]) < cap(b) {
				s.kept -= cap(s.free[0])
				s.free = slices.Delete(s.free, 0, 1)
			}
			if s.kept+cap(b) > s.Keep {
				continue
			}
		}
		s.free = append(s.free, b[:0])
		s.kept += cap(b)
	}
}

// Release drops every kept buffer.
func (s *Scratch) Release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.free, s.kept = nil, 0
	s.mu.Unlock()
}
