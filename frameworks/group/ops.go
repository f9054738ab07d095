package group

import (
	"fmt"
	"math"
	"slices"

	"github.com/gompi/gompi/mpierr"
)

// Error convention of the group operations, shared by package mpi:
//   - ErrGroup: a nil group (MPI_GROUP_NULL); package mpi adds freed groups.
//   - ErrRank: a rank that is out of range or given twice, in a rank list or
//     computed from a triplet, and a rank to translate that is neither a rank
//     of the group nor ProcNull.
//   - ErrArg: a malformed triplet (stride 0, or a stride whose sign does not
//     lead from first to last) and a world size out of range.
//   - ErrIntern: a module that stored something else than it was given.
//
// Every error names the bad input and says what is accepted. No operation
// panics on bad input.

// Comparison is the result of Compare; the values are MPI's (Open MPI's
// numbering; 1, MPI_CONGRUENT, is for communicators only).
type Comparison int

const (
	Ident   Comparison = 0 // same members in the same order
	Similar Comparison = 2 // same members in another order
	Unequal Comparison = 3 // different members
)

func (c Comparison) String() string {
	switch c {
	case Ident:
		return "ident"
	case 1:
		return "congruent"
	case Similar:
		return "similar"
	case Unequal:
		return "unequal"
	}
	return fmt.Sprintf("Comparison(%d)", int(c))
}

// Derived is implemented by stores that keep a group relative to another
// group (sparse ones): it lets the base and other modules walk a group's
// ancestry, for instance to store a union relative to the closest ancestor
// its operands share.
type Derived interface {
	// Parent is the group this one is stored relative to.
	Parent() *Group
	// ToParent returns the rank in Parent of group rank r (0 <= r < Size).
	ToParent(r int) int
}

// empty is the one empty group every operation returns for an empty result;
// it is immutable, so sharing it is safe.
var empty = New(NewDense(nil))

// Empty returns the empty group (MPI_GROUP_EMPTY's storage).
func Empty() *Group { return empty }

// Ops performs the group operations of one process with one module: it
// validates the arguments, computes the members in the order MPI defines,
// and asks Module to store them. Ops is a small value, meant to be copied.
//
// The zero Ops has no module; it serves operations on the empty group, whose
// results are always empty (or errors).
type Ops struct {
	// Module stores the groups the operations make.
	Module Module
	// Me is the world rank of the calling process, for the groups' MyRank.
	Me int
}

// World makes the group of world ranks 0..size-1, in order.
func (o Ops) World(size int) (*Group, error) {
	if size < 1 || size > math.MaxInt32 {
		return nil, mpierr.Errorf(mpierr.ErrArg, "a world of %d processes: the size must be in 1..%d", size, math.MaxInt32)
	}
	world := make([]int, size)
	for i := range world {
		world[i] = i
	}
	return o.make(world, nil, nil)
}

// Incl makes the group of g's members ranks[0], ranks[1], … in that order
// (MPI_Group_incl). No ranks gives the empty group.
func (o Ops) Incl(g *Group, ranks []int) (*Group, error) {
	if err := checkGroups(g); err != nil {
		return nil, err
	}
	if err := checkRanks(g.size, ranks); err != nil {
		return nil, err
	}
	return o.subset(g, ranks)
}

// Excl makes the group of g's members except the given ranks, in g's order
// (MPI_Group_excl). No ranks gives g's members; all of them the empty group.
func (o Ops) Excl(g *Group, ranks []int) (*Group, error) {
	if err := checkGroups(g); err != nil {
		return nil, err
	}
	if err := checkRanks(g.size, ranks); err != nil {
		return nil, err
	}
	return o.subset(g, complement(g.size, ranks))
}

// RangeIncl makes the group of the ranks the triplets (first, last, stride)
// compute, in triplet order (MPI_Group_range_incl); see ExpandRanges.
func (o Ops) RangeIncl(g *Group, ranges [][3]int) (*Group, error) {
	if err := checkGroups(g); err != nil {
		return nil, err
	}
	ranks, err := ExpandRanges(g.size, ranges)
	if err != nil {
		return nil, err
	}
	return o.subset(g, ranks)
}

// RangeExcl makes the group of g's members except the ranks the triplets
// compute, in g's order (MPI_Group_range_excl).
func (o Ops) RangeExcl(g *Group, ranges [][3]int) (*Group, error) {
	if err := checkGroups(g); err != nil {
		return nil, err
	}
	ranks, err := ExpandRanges(g.size, ranges)
	if err != nil {
		return nil, err
	}
	return o.subset(g, complement(g.size, ranks))
}

// Union makes the group of all of a's members in a's order, followed by
// b's members that are not in a, in b's order (MPI_Group_union).
func (o Ops) Union(a, b *Group) (*Group, error) {
	if err := checkGroups(a, b); err != nil {
		return nil, err
	}
	if b.size == 0 || a == b {
		return a, nil
	}
	if a.size == 0 {
		return b, nil
	}
	world := members(a)
	inA := worldSet(world)
	for i := 0; i < b.size; i++ {
		if w := b.World(i); !inA.has(w) {
			world = append(world, w)
		}
	}
	if len(world) == a.size {
		return a, nil
	}
	// A union has no single parent, but its operands often share an
	// ancestor (the world, for groups derived from it): store it relative
	// to the closest one, so that a sparse module can keep it small.
	if c := commonAncestor(a, b); c != nil {
		pr := make([]int, len(world))
		for i, w := range world {
			pr[i] = c.Rank(w)
		}
		return o.make(world, c, pr)
	}
	return o.make(world, nil, nil)
}

// Intersection makes the group of a's members that are also in b, in a's
// order (MPI_Group_intersection).
func (o Ops) Intersection(a, b *Group) (*Group, error) {
	return o.filter(a, b, true)
}

// Difference makes the group of a's members that are not in b, in a's
// order (MPI_Group_difference).
func (o Ops) Difference(a, b *Group) (*Group, error) {
	return o.filter(a, b, false)
}

// filter keeps a's members whose membership in b is keep.
func (o Ops) filter(a, b *Group, keep bool) (*Group, error) {
	if err := checkGroups(a, b); err != nil {
		return nil, err
	}
	inB := worldSet(members(b))
	var ranks []int
	for i := 0; i < a.size; i++ {
		if inB.has(a.World(i)) == keep {
			ranks = append(ranks, i)
		}
	}
	return o.subset(a, ranks)
}

// TranslateRanks returns the ranks in b of the processes with the given
// ranks in a (MPI_Group_translate_ranks): Undefined for a process that is
// not in b, ProcNull for ProcNull (MPI-2.2), also when a or b is empty.
// Each translation costs one lookup in b: O(1) for the world and for dense
// groups (after a one-time index), a walk to the dense ancestor for sparse
// ones; never O(size of the world).
func TranslateRanks(a *Group, ranks []int, b *Group) ([]int, error) {
	if err := checkGroups(a, b); err != nil {
		return nil, err
	}
	out := make([]int, len(ranks))
	for i, r := range ranks {
		switch {
		case r == ProcNull:
			out[i] = ProcNull
		case r < 0 || r >= a.size:
			return nil, mpierr.Errorf(mpierr.ErrRank,
				"rank %d (index %d) is not in the first group: %s, or ProcNull (%d)", r, i, validRanks(a.size), ProcNull)
		case a == b:
			out[i] = r
		default:
			out[i] = b.Rank(a.World(r))
		}
	}
	return out, nil
}

// Compare says whether a and b have the same members in the same order
// (Ident), the same members in another order (Similar), or not the same
// members (Unequal) (MPI_Group_compare). Two empty groups are Ident.
func Compare(a, b *Group) (Comparison, error) {
	if err := checkGroups(a, b); err != nil {
		return Unequal, err
	}
	if a == b {
		return Ident, nil
	}
	if a.size != b.size {
		return Unequal, nil
	}
	ident := true
	for i := 0; i < a.size; i++ {
		if a.World(i) != b.World(i) {
			ident = false
			break
		}
	}
	if ident {
		return Ident, nil
	}
	// Same size and no member twice: the same set iff a ⊆ b.
	inB := worldSet(members(b))
	for i := 0; i < a.size; i++ {
		if !inB.has(a.World(i)) {
			return Unequal, nil
		}
	}
	return Similar, nil
}

// subset makes the group of g's members with the given (valid, distinct)
// ranks, in that order.
func (o Ops) subset(g *Group, ranks []int) (*Group, error) {
	world := make([]int, len(ranks))
	for i, r := range ranks {
		world[i] = g.World(r)
	}
	return o.make(world, g, ranks)
}

// make stores a group. The empty group and a group with exactly its
// parent's members in its parent's order are not stored again: groups are
// immutable, so the existing one serves.
func (o Ops) make(world []int, parent *Group, parentRanks []int) (*Group, error) {
	if len(world) == 0 {
		return empty, nil
	}
	if parent != nil && len(parentRanks) == parent.size && isIdentity(parentRanks) {
		return parent, nil
	}
	if o.Module == nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "no group module to store a group of %d members", len(world))
	}
	s := o.Module.New(world, parent, parentRanks)
	if s == nil || s.Size() != len(world) {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "group module %T stored %d members as %v", o.Module, len(world), s)
	}
	g := New(s)
	if i := slices.Index(world, o.Me); i >= 0 {
		g.me = i
	}
	return g, nil
}

// commonAncestor returns the closest group that both a and b are stored
// relative to (through Derived stores), counting a and b themselves, or nil.
func commonAncestor(a, b *Group) *Group {
	chain := map[*Group]bool{}
	for g := a; g != nil; g = parentOf(g) {
		chain[g] = true
	}
	for g := b; g != nil; g = parentOf(g) {
		if chain[g] {
			return g
		}
	}
	return nil
}

func parentOf(g *Group) *Group {
	if d, ok := g.store.(Derived); ok {
		return d.Parent()
	}
	return nil
}

func checkGroups(gs ...*Group) error {
	for i, g := range gs {
		if g == nil {
			which := ""
			if len(gs) > 1 {
				which = fmt.Sprintf(" (argument %d)", i+1)
			}
			return mpierr.Errorf(mpierr.ErrGroup, "nil group%s: pass a group made by an operation, or the empty group", which)
		}
	}
	return nil
}

// checkRanks validates a rank list: every rank in 0..size-1, none twice.
// It stops at the first bad rank, so it looks at no more than size+1 of
// them and needs size bits.
func checkRanks(size int, ranks []int) error {
	seen := newBitset(size)
	for i, r := range ranks {
		if r < 0 || r >= size {
			return mpierr.Errorf(mpierr.ErrRank, "rank %d (index %d) is out of range: %s", r, i, validRanks(size))
		}
		if seen.has(r) {
			return mpierr.Errorf(mpierr.ErrRank, "rank %d appears twice (indexes %d and %d): ranks must be distinct",
				r, slices.Index(ranks, r), i)
		}
		seen.set(r)
	}
	return nil
}

// complement returns 0..size-1 without the given (valid) ranks, ascending.
func complement(size int, ranks []int) []int {
	out := newBitset(size)
	for _, r := range ranks {
		out.set(r)
	}
	keep := make([]int, 0, size-len(ranks))
	for r := 0; r < size; r++ {
		if !out.has(r) {
			keep = append(keep, r)
		}
	}
	return keep
}

func isIdentity(ranks []int) bool {
	for i, r := range ranks {
		if r != i {
			return false
		}
	}
	return true
}

// members returns g's world ranks in group order.
func members(g *Group) []int {
	out := make([]int, g.size)
	for i := range out {
		out[i] = g.World(i)
	}
	return out
}

// worldSet returns the set of the given world ranks: one bit per world rank
// up to the largest, which is a few KiB to 128 KiB for worlds up to 1 M.
func worldSet(world []int) bitset {
	hi := -1
	for _, w := range world {
		hi = max(hi, w)
	}
	s := newBitset(hi + 1)
	for _, w := range world {
		s.set(w)
	}
	return s
}

// bitset is a set of small non-negative ints.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (s bitset) set(i int) { s[i/64] |= 1 << (uint(i) % 64) }

// has accepts any int; those beyond the set are absent.
func (s bitset) has(i int) bool {
	return i >= 0 && i/64 < len(s) && s[i/64]&(1<<(uint(i)%64)) != 0
}
