package mpi

import (
	"fmt"
	"sync/atomic"

	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
)

// Group is an MPI group: an ordered set of processes, local to the process
// that made it. Operations never change a group; they make new ones.
//
// A *Group is a handle. Free makes the handle invalid; the storage lives on
// as long as other handles (or groups derived from it) use it. A nil *Group
// plays MPI_GROUP_NULL.
//
// Errors (all wrap an MPI class, usable with errors.Is):
//   - ErrGroup: a nil or freed group.
//   - ErrRank: a rank out of range or given twice, in a rank list or
//     computed from a triplet; a rank to translate that is neither a rank of
//     the group nor ProcNull.
//   - ErrArg: a malformed triplet: stride 0, or a stride whose sign does not
//     lead from first to last.
//
// Groups may be used from several goroutines; only Free must not race with
// other uses of the same handle.
type Group struct {
	g *group.Group
	// ops makes the groups derived from this one: the module and the
	// world rank of the instance that made it. GroupEmpty has none.
	ops   group.Ops
	freed atomic.Bool
}

// GroupEmpty is the empty group (MPI_GROUP_EMPTY): every operation accepts
// it, every empty result is this very handle, and freeing it does nothing.
var GroupEmpty = &Group{g: group.Empty()}

// Undefined is the rank of a process that is not in a group (MPI_UNDEFINED,
// Open MPI's value -32766).
const Undefined = group.Undefined

// ProcNull is the null process (MPI_PROC_NULL, Open MPI's value -2);
// TranslateRanks maps it to itself.
const ProcNull = group.ProcNull

// Comparison is the result of comparing groups (and communicators), with
// MPI's values.
type Comparison int

const (
	// Ident: the same members in the same order (or the same object).
	Ident = Comparison(group.Ident)
	// Congruent: for communicators only (Comm.Compare), identical groups
	// in different contexts.
	Congruent Comparison = 1
	// Similar: the same members in another order.
	Similar = Comparison(group.Similar)
	// Unequal: not the same members.
	Unequal = Comparison(group.Unequal)
)

func (c Comparison) String() string { return group.Comparison(c).String() }

// groupState is an Instance's part of the group framework: the selected
// module and the groups every instance has.
type groupState struct {
	ops         group.Ops
	world, self *group.Group
}

// setup selects the group module (the group parameter, mpi_use_sparse_groups)
// and makes the world and self groups.
func (s *groupState) setup(b *mca.Base, rank, size int) error {
	m, _, err := group.Select(b)
	if err != nil {
		return err
	}
	s.ops = group.Ops{Module: m, Me: rank}
	if s.world, err = s.ops.World(size); err != nil {
		return err
	}
	s.self, err = s.ops.Incl(s.world, []int{rank})
	return err
}

// WorldGroup returns a new handle to the group of all the job's processes,
// in world rank order (the group of MPI_COMM_WORLD).
func (i *Instance) WorldGroup() *Group { return newGroup(i.groups.ops, i.groups.world) }

// SelfGroup returns a new handle to the group of this process alone (the
// group of MPI_COMM_SELF).
func (i *Instance) SelfGroup() *Group { return newGroup(i.groups.ops, i.groups.self) }

// newGroup makes a handle; an empty group is always GroupEmpty.
func newGroup(ops group.Ops, g *group.Group) *Group {
	if g.Size() == 0 {
		return GroupEmpty
	}
	return &Group{g: g, ops: ops}
}

// check returns the ErrGroup error for a nil or freed handle.
func (g *Group) check(op string) error { return g.checkArg(op, "") }

// checkArg is check with the argument's name, for two-group operations.
func (g *Group) checkArg(op, arg string) error {
	switch {
	case g == nil:
		return mpierr.Errorf(mpierr.ErrGroup, "mpi: Group.%s: nil %sgroup (MPI_GROUP_NULL): pass a group made by an operation, or GroupEmpty", op, arg)
	case g.freed.Load():
		return mpierr.Errorf(mpierr.ErrGroup, "mpi: Group.%s: the %sgroup was freed", op, arg)
	}
	return nil
}

// check2 checks both operands of a two-group operation.
func check2(op string, g, h *Group) error {
	if err := g.checkArg(op, ""); err != nil {
		return err
	}
	return h.checkArg(op, "second ")
}

// Size returns the number of members (MPI_Group_size).
func (g *Group) Size() (int, error) {
	if err := g.check("Size"); err != nil {
		return 0, err
	}
	return g.g.Size(), nil
}

// Rank returns the calling process's rank in the group, or Undefined when
// it is not a member (MPI_Group_rank).
func (g *Group) Rank() (int, error) {
	if err := g.check("Rank"); err != nil {
		return Undefined, err
	}
	return g.g.MyRank(), nil
}

// result wraps what a framework operation returned.
func result(op string, ops group.Ops, g *group.Group, err error) (*Group, error) {
	if err != nil {
		return nil, fmt.Errorf("mpi: Group.%s: %w", op, err)
	}
	return newGroup(ops, g), nil
}

// Incl returns the group of the members with the given ranks, in that
// order (MPI_Group_incl). The ranks must be distinct ranks of g; none
// gives GroupEmpty.
func (g *Group) Incl(ranks []int) (*Group, error) {
	if err := g.check("Incl"); err != nil {
		return nil, err
	}
	r, err := g.ops.Incl(g.g, ranks)
	return result("Incl", g.ops, r, err)
}

// Excl returns the group of the members without the given ranks, in g's
// order (MPI_Group_excl). The ranks must be distinct ranks of g.
func (g *Group) Excl(ranks []int) (*Group, error) {
	if err := g.check("Excl"); err != nil {
		return nil, err
	}
	r, err := g.ops.Excl(g.g, ranks)
	return result("Excl", g.ops, r, err)
}

// RangeIncl returns the group of the members with the ranks that the
// triplets (first, last, stride) compute, in triplet order
// (MPI_Group_range_incl). A triplet computes first, first+stride, …, up
// to last; first > last needs a negative stride. Every computed rank must
// be a rank of g, and no rank may be computed twice.
func (g *Group) RangeIncl(ranges [][3]int) (*Group, error) {
	if err := g.check("RangeIncl"); err != nil {
		return nil, err
	}
	r, err := g.ops.RangeIncl(g.g, ranges)
	return result("RangeIncl", g.ops, r, err)
}

// RangeExcl returns the group of the members without the ranks the
// triplets compute, in g's order (MPI_Group_range_excl).
func (g *Group) RangeExcl(ranges [][3]int) (*Group, error) {
	if err := g.check("RangeExcl"); err != nil {
		return nil, err
	}
	r, err := g.ops.RangeExcl(g.g, ranges)
	return result("RangeExcl", g.ops, r, err)
}

// opsOf picks who makes the result of a two-group operation: g's instance,
// or h's when g is GroupEmpty.
func opsOf(g, h *Group) group.Ops {
	if g.ops.Module != nil {
		return g.ops
	}
	return h.ops
}

// Union returns all of g's members in g's order, then h's members that are
// not in g, in h's order (MPI_Group_union).
func (g *Group) Union(h *Group) (*Group, error) {
	if err := check2("Union", g, h); err != nil {
		return nil, err
	}
	ops := opsOf(g, h)
	r, err := ops.Union(g.g, h.g)
	return result("Union", ops, r, err)
}

// Intersection returns g's members that are also in h, in g's order
// (MPI_Group_intersection).
func (g *Group) Intersection(h *Group) (*Group, error) {
	if err := check2("Intersection", g, h); err != nil {
		return nil, err
	}
	ops := opsOf(g, h)
	r, err := ops.Intersection(g.g, h.g)
	return result("Intersection", ops, r, err)
}

// Difference returns g's members that are not in h, in g's order
// (MPI_Group_difference).
func (g *Group) Difference(h *Group) (*Group, error) {
	if err := check2("Difference", g, h); err != nil {
		return nil, err
	}
	ops := opsOf(g, h)
	r, err := ops.Difference(g.g, h.g)
	return result("Difference", ops, r, err)
}

// TranslateRanks returns the ranks in h of the processes with the given
// ranks in g (MPI_Group_translate_ranks): Undefined for a process that is
// not in h, ProcNull for ProcNull (also when a group is empty).
func (g *Group) TranslateRanks(ranks []int, h *Group) ([]int, error) {
	if err := check2("TranslateRanks", g, h); err != nil {
		return nil, err
	}
	out, err := group.TranslateRanks(g.g, ranks, h.g)
	if err != nil {
		return nil, fmt.Errorf("mpi: Group.TranslateRanks: %w", err)
	}
	return out, nil
}

// Compare returns Ident when g and h have the same members in the same
// order, Similar when in another order, Unequal otherwise
// (MPI_Group_compare).
func (g *Group) Compare(h *Group) (Comparison, error) {
	if err := check2("Compare", g, h); err != nil {
		return Unequal, err
	}
	c, err := group.Compare(g.g, h.g)
	if err != nil {
		return Unequal, fmt.Errorf("mpi: Group.Compare: %w", err)
	}
	return Comparison(c), nil
}

// Storage names the group's storage format ("dense", "range", "stride",
// "bitmap") and the bytes it takes: what mpi_use_sparse_groups changes.
func (g *Group) Storage() (format string, bytes int, err error) {
	if err := g.check("Storage"); err != nil {
		return "", 0, err
	}
	st := g.g.Store()
	return st.Format(), st.Bytes(), nil
}

// Free invalidates the handle (MPI_Group_free): any later use of it, Free
// included, is an ErrGroup error. Freeing GroupEmpty is allowed and does
// nothing, as in Open MPI and MPICH.
func (g *Group) Free() error {
	if err := g.check("Free"); err != nil {
		return err
	}
	if g == GroupEmpty {
		return nil
	}
	if !g.freed.CompareAndSwap(false, true) {
		return mpierr.Errorf(mpierr.ErrGroup, "mpi: Group.Free: the group was freed")
	}
	return nil
}
