package group

import (
	"math"
	"slices"
	"sync"
)

// NewDense returns the dense store of the given world ranks, in group order:
// one int32 per member.
//
// Size formula: Bytes = 4·n for n members. The reverse lookup (world rank to
// group rank) needs no extra memory when the members are consecutive world
// ranks in ascending order (the world group, or a block of it); otherwise an
// index of at most 8·n more bytes is built on the first Rank call and kept.
// That index is a cache, not part of the format, and Bytes does not count it.
//
// Every world rank must be in 0..math.MaxInt32 and appear once; the base
// guarantees both.
func NewDense(world []int) Store {
	s := &denseStore{ranks: make([]int32, len(world)), contiguous: true}
	for i, w := range world {
		if w < 0 || w > math.MaxInt32 {
			panic("group: NewDense: world rank out of int32 range") // the base never passes one
		}
		s.ranks[i] = int32(w)
		if w != world[0]+i {
			s.contiguous = false
		}
	}
	return s
}

type denseStore struct {
	ranks      []int32
	contiguous bool // ranks[i] == ranks[0]+i: Rank is a subtraction

	once sync.Once
	// Exactly one of direct and sorted is set once the index is built.
	direct []int32       // direct[w-lo] is the rank of world rank w, or -1
	lo     int           // smallest member world rank, for direct
	sorted []worldToRank // by world rank, for binary search
}

type worldToRank struct{ world, rank int32 }

func (s *denseStore) Size() int           { return len(s.ranks) }
func (s *denseStore) World(r int) int     { return int(s.ranks[r]) }
func (s *denseStore) Format() string      { return "dense" }
func (s *denseStore) Bytes() int          { return 4 * len(s.ranks) }
func (s *denseStore) DenseRanks() []int32 { return s.ranks }

// reverseBuilt reports whether the reverse index exists (for tests).
func (s *denseStore) reverseBuilt() bool { return s.direct != nil || s.sorted != nil }

func (s *denseStore) Rank(w int) int {
	n := len(s.ranks)
	if n == 0 {
		return Undefined
	}
	if s.contiguous {
		if r := w - int(s.ranks[0]); r >= 0 && r < n {
			return r
		}
		return Undefined
	}
	s.once.Do(s.buildIndex)
	if s.direct != nil {
		if i := w - s.lo; i >= 0 && i < len(s.direct) && s.direct[i] >= 0 {
			return int(s.direct[i])
		}
		return Undefined
	}
	if w < math.MinInt32 || w > math.MaxInt32 {
		return Undefined
	}
	i, found := slices.BinarySearchFunc(s.sorted, int32(w), func(e worldToRank, t int32) int {
		return cmpInt32(e.world, t)
	})
	if !found {
		return Undefined
	}
	return int(s.sorted[i].rank)
}

// buildIndex makes the reverse index: a direct table when the members'
// world ranks span at most twice their number (4 bytes per spanned rank, so
// at most 8·n), a sorted table otherwise (8·n bytes, O(log n) lookups).
func (s *denseStore) buildIndex() {
	lo, hi := s.ranks[0], s.ranks[0]
	for _, w := range s.ranks {
		lo, hi = min(lo, w), max(hi, w)
	}
	n := len(s.ranks)
	if span := int(hi) - int(lo) + 1; span <= 2*n {
		d := make([]int32, span)
		for i := range d {
			d[i] = -1
		}
		for r, w := range s.ranks {
			d[int(w)-int(lo)] = int32(r)
		}
		s.direct, s.lo = d, int(lo)
		return
	}
	t := make([]worldToRank, n)
	for r, w := range s.ranks {
		t[r] = worldToRank{w, int32(r)}
	}
	slices.SortFunc(t, func(a, b worldToRank) int { return cmpInt32(a.world, b.world) })
	s.sorted = t
}

func cmpInt32(a, b int32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
