// Package sparse is the group component that stores a derived group in the
// least space: as ranges, a stride or a bitmap of ranks in the group it was
// derived from (its parent) or in one of the parent's own ancestors, or
// densely when that is smaller (Open MPI's sparse groups, from the RFC in
// which Jeff Squyres proposed them for large jobs).
//
// It declines unless mpi_use_sparse_groups is on, and then outranks dense.
// Lookups of a sparse group pay a call and a walk through the ancestors it
// is stored relative to, down to a dense one (usually the world); the
// choice of format therefore prefers, among equal sizes, the shorter walk.
//
// # Formats and their size formulas
//
// For a group of n members whose ranks in the chosen ancestor A (of size P)
// are a[0..n-1], Bytes counts the format's payload, as follows.
//
//   - dense: the world rank of every member as int32 (group.NewDense):
//     4·n. Chosen when no other format is strictly smaller (so groups of one
//     or two members stay dense, and lookups stay inline).
//   - range: the maximal runs of consecutive ascending ranks of A, a[i] =
//     a[i-1]+1, as (first rank in A, end) pairs of int32, where end is the
//     cumulative group rank at which the run ends: 8·L for L runs. The
//     cumulative end (rather than Open MPI's length) costs the same and lets
//     the lookup binary-search the runs: O(log L).
//   - stride: a[i] = first + i·stride for all i, any non-zero stride
//     (negative ones too, which Open MPI does not allow: a reversed world
//     costs 12 bytes rather than 4·n), as first, stride and count int32:
//     12. Lookups are O(1).
//   - bitmap: only when a is strictly ascending (a bitmap cannot encode
//     order): one bit per rank of A, in 64-bit words, plus a directory of
//     the number of members before each 512-bit block after the first, as
//     uint32: 8·⌈P/64⌉ + 4·(⌈P/512⌉−1). Open MPI keeps ⌈P/8⌉ bytes and scans
//     the bitmap on every lookup, O(P); the directory (1/16 of the bitmap)
//     makes lookups O(log P) plus at most 8 words.
//
// Among all (ancestor, format) pairs, the smallest Bytes wins; ties go to
// the one whose lookups walk fewer groups (dense, then the ancestor nearest
// the dense root), then to stride, range, bitmap (by lookup cost).
// Considering the ancestors and not only the parent keeps chains short:
// every other rank of every other rank of the world is a stride of 4 in the
// world, one hop, and not a stride of 2 in a stride of 2.
package sparse

import (
	"math/bits"
	"sort"

	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/mca"
)

// Priority is the component's priority when mpi_use_sparse_groups is on;
// it outranks dense's.
const Priority = 20

// Component is the sparse group component.
type Component struct{}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "group", Name: group.SparseComponent, Version: mca.GompiVersion, API: group.Framework.API, Priority: Priority}
}

// Register declares the component's parameters: none of its own; the switch
// is the framework's mpi_use_sparse_groups.
func (c *Component) Register(r *mca.Registrar) {}

// Query declines unless mpi_use_sparse_groups is on.
func (c *Component) Query(b *mca.Base) (int, group.Module, error) {
	v := b.Lookup(group.SparseGroupsParam)
	if !v.Bool() {
		return 0, nil, mca.Decline("%s = %s (source: %s); set it to 1 to store groups sparsely",
			group.SparseGroupsParam, v.String(), v.Source)
	}
	return Priority, Module{log: b.Logger(group.Framework.Name).Named(group.SparseComponent)}, nil
}

// Module stores groups sparsely. The zero value works (and does not log).
type Module struct {
	log *mca.Logger
}

// Format names, as Store.Format reports them.
const (
	Dense  = "dense"
	Range  = "range"
	Stride = "stride"
	Bitmap = "bitmap"
)

// Sizes are the bytes a group takes in each format relative to one
// ancestor, by the formulas of the package comment; -1 marks a format that
// cannot represent the group.
type Sizes struct {
	Dense, Range, Stride, Bitmap int
}

// SizesOf returns the size of every format for a group whose members have
// the given ranks in an ancestor of size parentSize.
func SizesOf(ranks []int, parentSize int) Sizes {
	n := len(ranks)
	s := Sizes{Dense: 4 * n, Range: 8 * runs(ranks), Stride: -1, Bitmap: -1}
	if n == 0 {
		return s
	}
	if _, ok := strideOf(ranks); ok {
		s.Stride = 12
	}
	if ascending(ranks) {
		s.Bitmap = bitmapBytes(parentSize)
	}
	return s
}

func bitmapBytes(p int) int {
	return 8*((p+63)/64) + 4*((p+511)/512-1)
}

// runs counts the maximal runs of consecutive ascending ranks.
func runs(ranks []int) int {
	l := 0
	for i, r := range ranks {
		if i == 0 || r != ranks[i-1]+1 {
			l++
		}
	}
	return l
}

// strideOf returns the common difference of ranks, if there is one.
func strideOf(ranks []int) (int, bool) {
	if len(ranks) < 2 {
		return 1, true
	}
	d := ranks[1] - ranks[0]
	for i := 2; i < len(ranks); i++ {
		if ranks[i]-ranks[i-1] != d {
			return 0, false
		}
	}
	return d, true
}

func ascending(ranks []int) bool {
	for i := 1; i < len(ranks); i++ {
		if ranks[i] <= ranks[i-1] {
			return false
		}
	}
	return true
}

// choice is one candidate storage.
type choice struct {
	format string
	bytes  int
	hops   int // groups a lookup walks through, beyond the inline dense one
	level  int // index in the ancestor list; -1 for dense
}

// formatOrder ranks formats by lookup cost, for ties.
func formatOrder(f string) int {
	switch f {
	case Dense:
		return 0
	case Stride:
		return 1
	case Range:
		return 2
	}
	return 3
}

func (c choice) better(d choice) bool {
	if c.bytes != d.bytes {
		return c.bytes < d.bytes
	}
	if c.hops != d.hops {
		return c.hops < d.hops
	}
	return formatOrder(c.format) < formatOrder(d.format)
}

// New stores a group in the smallest format relative to its parent or one
// of the parent's ancestors (see the package comment).
func (m Module) New(world []int, parent *group.Group, parentRanks []int) group.Store {
	n := len(world)
	best := choice{format: Dense, bytes: 4 * n, level: -1}
	type level struct {
		g     *group.Group
		ranks []int
	}
	var levels []level
	if parent != nil && n > 0 {
		levels = append(levels, level{parent, parentRanks})
		// The ancestors: as long as a level is itself stored relative to
		// another group, the members' ranks there are one step away.
		for {
			l := levels[len(levels)-1]
			d, ok := l.g.Store().(group.Derived)
			if !ok {
				break
			}
			up := make([]int, n)
			for i, r := range l.ranks {
				up[i] = d.ToParent(r)
			}
			levels = append(levels, level{d.Parent(), up})
		}
	}
	for j, l := range levels {
		hops := len(levels) - j // this store, then the derived levels above j
		s := SizesOf(l.ranks, l.g.Size())
		for _, c := range []choice{
			{Stride, s.Stride, hops, j},
			{Range, s.Range, hops, j},
			{Bitmap, s.Bitmap, hops, j},
		} {
			if c.bytes >= 0 && c.better(best) {
				best = c
			}
		}
	}
	var st group.Store
	switch best.format {
	case Dense:
		st = group.NewDense(world)
	case Stride:
		st = newStride(levels[best.level].g, levels[best.level].ranks)
	case Range:
		st = newRange(levels[best.level].g, levels[best.level].ranks)
	case Bitmap:
		st = newBitmap(levels[best.level].g, levels[best.level].ranks)
	}
	if m.log != nil && m.log.V(mca.VerboseTrace) {
		m.log.Log(mca.VerboseTrace, "stored group", "members", n, "format", best.format, "bytes", best.bytes,
			"dense_bytes", 4*n, "hops", best.hops, "ancestor", best.level)
	}
	return st
}

// link is what every sparse format shares: the group it is stored relative
// to, and the lookups through it.
type link struct {
	parent *group.Group
}

// Parent is the group the store is relative to.
func (l link) Parent() *group.Group { return l.parent }

// strideStore: member i is rank first + i·stride of the parent.
type strideStore struct {
	link
	first, stride, n int32
}

func newStride(parent *group.Group, ranks []int) *strideStore {
	d, _ := strideOf(ranks)
	return &strideStore{link: link{parent}, first: int32(ranks[0]), stride: int32(d), n: int32(len(ranks))}
}

func (s *strideStore) Size() int          { return int(s.n) }
func (s *strideStore) Format() string     { return Stride }
func (s *strideStore) Bytes() int         { return 12 }
func (s *strideStore) ToParent(r int) int { return int(s.first) + r*int(s.stride) }
func (s *strideStore) World(r int) int    { return s.parent.World(s.ToParent(r)) }
func (s *strideStore) Rank(world int) int { return fromParent(s.parent, world, s.fromParent) }
func (s *strideStore) fromParent(p int) int {
	d, st := p-int(s.first), int(s.stride)
	if d%st != 0 {
		return group.Undefined
	}
	if q := d / st; q >= 0 && q < int(s.n) {
		return q
	}
	return group.Undefined
}

// fromParent is Rank for every format: the world rank's rank in the parent
// (a walk down the ancestors), then the format's own step.
func fromParent(parent *group.Group, world int, step func(p int) int) int {
	p := parent.Rank(world)
	if p == group.Undefined {
		return group.Undefined
	}
	return step(p)
}

// rangeStore: the members are runs of consecutive parent ranks.
type rangeStore struct {
	link
	runs []run
	// sorted says the runs ascend and do not overlap (the group is in
	// parent order), so Rank can binary-search them too.
	sorted bool
}

type run struct {
	first int32 // parent rank of the run's first member
	end   int32 // group rank just past the run's last member
}

func newRange(parent *group.Group, ranks []int) *rangeStore {
	s := &rangeStore{link: link{parent}, runs: make([]run, 0, runs(ranks)), sorted: ascending(ranks)}
	for i, r := range ranks {
		if i == 0 || r != ranks[i-1]+1 {
			s.runs = append(s.runs, run{first: int32(r)})
		}
		s.runs[len(s.runs)-1].end = int32(i + 1)
	}
	return s
}

func (s *rangeStore) Size() int          { return int(s.runs[len(s.runs)-1].end) }
func (s *rangeStore) Format() string     { return Range }
func (s *rangeStore) Bytes() int         { return 8 * len(s.runs) }
func (s *rangeStore) World(r int) int    { return s.parent.World(s.ToParent(r)) }
func (s *rangeStore) Rank(world int) int { return fromParent(s.parent, world, s.fromParent) }

func (s *rangeStore) start(k int) int {
	if k == 0 {
		return 0
	}
	return int(s.runs[k-1].end)
}

func (s *rangeStore) ToParent(r int) int {
	k := sort.Search(len(s.runs), func(i int) bool { return int(s.runs[i].end) > r })
	return int(s.runs[k].first) + r - s.start(k)
}

func (s *rangeStore) fromParent(p int) int {
	in := func(k int) (int, bool) {
		off := p - int(s.runs[k].first)
		if off >= 0 && off < int(s.runs[k].end)-s.start(k) {
			return s.start(k) + off, true
		}
		return 0, false
	}
	if s.sorted {
		// The first run whose last parent rank is >= p.
		k := sort.Search(len(s.runs), func(i int) bool {
			return int(s.runs[i].first)+int(s.runs[i].end)-s.start(i)-1 >= p
		})
		if k < len(s.runs) {
			if r, ok := in(k); ok {
				return r
			}
		}
		return group.Undefined
	}
	for k := range s.runs {
		if r, ok := in(k); ok {
			return r
		}
	}
	return group.Undefined
}

// bitmapStore: bit p is set iff parent rank p is a member; member i is the
// (i+1)-th set bit.
type bitmapStore struct {
	link
	words []uint64
	// dir[b-1] is the number of members before 512-bit block b (block 0
	// has none before it).
	dir []uint32
	n   int32
}

const wordsPerBlock = 8 // 512 bits

func newBitmap(parent *group.Group, ranks []int) *bitmapStore {
	p := parent.Size()
	s := &bitmapStore{link: link{parent}, words: make([]uint64, (p+63)/64), n: int32(len(ranks))}
	for _, r := range ranks {
		s.words[r/64] |= 1 << (uint(r) % 64)
	}
	blocks := (len(s.words) + wordsPerBlock - 1) / wordsPerBlock
	s.dir = make([]uint32, max(blocks-1, 0))
	var cum uint32
	for b := 1; b < blocks; b++ {
		for _, w := range s.words[(b-1)*wordsPerBlock : b*wordsPerBlock] {
			cum += uint32(bits.OnesCount64(w))
		}
		s.dir[b-1] = cum
	}
	return s
}

func (s *bitmapStore) Size() int          { return int(s.n) }
func (s *bitmapStore) Format() string     { return Bitmap }
func (s *bitmapStore) Bytes() int         { return 8*len(s.words) + 4*len(s.dir) }
func (s *bitmapStore) World(r int) int    { return s.parent.World(s.ToParent(r)) }
func (s *bitmapStore) Rank(world int) int { return fromParent(s.parent, world, s.fromParent) }

// before is the number of members before block b.
func (s *bitmapStore) before(b int) int {
	if b == 0 {
		return 0
	}
	return int(s.dir[b-1])
}

// ToParent finds the (r+1)-th set bit: the directory gives its block, then
// at most 8 words are counted.
func (s *bitmapStore) ToParent(r int) int {
	b := sort.Search(len(s.dir), func(i int) bool { return int(s.dir[i]) > r })
	rem := r - s.before(b)
	for w := b * wordsPerBlock; ; w++ {
		x := s.words[w]
		c := bits.OnesCount64(x)
		if rem < c {
			for ; rem > 0; rem-- {
				x &= x - 1 // drop the lowest set bit
			}
			return w*64 + bits.TrailingZeros64(x)
		}
		rem -= c
	}
}

// fromParent counts the set bits below p.
func (s *bitmapStore) fromParent(p int) int {
	w := p / 64
	bit := uint64(1) << (uint(p) % 64)
	if s.words[w]&bit == 0 {
		return group.Undefined
	}
	b := w / wordsPerBlock
	r := s.before(b)
	for _, x := range s.words[b*wordsPerBlock : w] {
		r += bits.OnesCount64(x)
	}
	return r + bits.OnesCount64(s.words[w]&(bit-1))
}
