// Package group declares the group storage framework: how a group maps its
// ranks to world ranks. An instance uses one store module (single select):
// dense by default, sparse when mpi_use_sparse_groups is on.
//
// Group is the concrete type the PML looks ranks up in on every message. It
// is a struct, not an interface, so that its lookup inlines at the caller:
// for a dense group the lookup is a slice index behind one predictable
// branch, and only sparse groups pay a call.
//
// The MPI group operations (incl, excl, range_incl, range_excl, union,
// intersection, difference, translate_ranks, compare) are written once, in
// this package, on top of any Store (see Ops): a module only decides how to
// store the members it is given, so every store follows the same semantics.
package group

import (
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// SparseGroupsParam is the name of the switch for sparse group storage.
const SparseGroupsParam = "mpi_use_sparse_groups"

// SparseComponent is the name of the component that SparseGroupsParam asks
// for; Select refuses a selection that excludes it while the switch is on.
const SparseComponent = "sparse"

// Framework is the group framework's declaration.
var Framework = &mca.Framework{
	Name:        "group",
	Description: "Group storage: maps group ranks to world ranks, densely or relative to a parent",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.SingleSelect,
	Check:       mca.Implements[Component](),
	Params: []params.Def{{
		Name: SparseGroupsParam, Type: params.Bool, Default: "false", Level: 2, Scope: params.ScopeAllEq,
		Synonyms: []string{"mpi_use_sparse_group_storage"},
		Help:     "Store groups derived from the world as ranges, a stride or a bitmap relative to their parent, whichever is smallest (sparse component)",
	}},
}

func init() { mca.RegisterFramework(Framework) }

// Undefined is the rank of a process that is not a member (MPI_UNDEFINED,
// Open MPI's value).
const Undefined = -32766

// ProcNull is the null process (MPI_PROC_NULL, Open MPI's value):
// TranslateRanks maps it to itself.
const ProcNull = -2

// Store is one group's storage: it maps the group's ranks to world ranks
// and back. A store is immutable once made and safe for concurrent use.
type Store interface {
	// Size is the number of members.
	Size() int
	// World returns the world rank of group rank r. The caller guarantees
	// 0 <= r < Size().
	World(r int) int
	// Rank returns the group rank of a world rank, or Undefined for a
	// process that is not a member (any int may be asked). The base calls
	// it for translations, so it must not cost O(world size) per call.
	Rank(world int) int
	// Format names the storage: "dense", "range", "stride", "bitmap".
	Format() string
	// Bytes is the memory the storage's payload uses, by the formula
	// documented with each format (for sparse formats, the group's own
	// payload, not its parent's).
	Bytes() int
}

// Group is an ordered set of processes, immutable once made. Groups are
// shared freely: many handles (and derived sparse groups) may refer to one.
type Group struct {
	// dense holds the world rank of every member when the store is dense;
	// nil otherwise. It is what makes the common lookup a slice index.
	dense []int32
	store Store
	size  int
	// me is the rank in the group of the process that made it (the Ops's
	// Me), or Undefined; MPI_Group_rank is asked often and must not search.
	me int
}

// New wraps a store. A store that exposes its world ranks as a slice (the
// dense one, through Denser) gets the fast path. The group's MyRank is
// Undefined; groups made by Ops know it.
func New(s Store) *Group {
	g := &Group{store: s, size: s.Size(), me: Undefined}
	if d, ok := s.(Denser); ok {
		g.dense = d.DenseRanks()
		if g.dense == nil {
			// An empty dense group must still take the slice branch.
			g.dense = []int32{}
		}
	}
	return g
}

// Denser is implemented by stores that keep every member's world rank in a
// slice; the Group then indexes it directly. The slice must not change.
type Denser interface {
	DenseRanks() []int32
}

// World returns the world rank of group rank r (0 <= r < Size()). It is
// small enough to inline: a dense group costs one branch and a slice index.
// Keep it that way: the PML calls it for every message
// (go build -gcflags=-m ./frameworks/group/ reports "can inline").
func (g *Group) World(r int) int {
	if g.dense != nil {
		return int(g.dense[r])
	}
	return g.store.World(r)
}

// Size returns the number of members.
func (g *Group) Size() int { return g.size }

// Rank returns the group rank of a world rank, or Undefined.
func (g *Group) Rank(world int) int { return g.store.Rank(world) }

// MyRank returns the rank in the group of the process whose Ops made it,
// or Undefined when that process is not a member.
func (g *Group) MyRank() int { return g.me }

// Store returns the group's storage.
func (g *Group) Store() Store { return g.store }

// Module makes stores. It is what a group component's Query returns. The
// base (Ops) validates every argument and computes the members; a module
// only chooses how to keep them.
type Module interface {
	// New stores a group given its members' world ranks, in group order
	// (at least one member; the base keeps the empty group itself).
	// parent is the group it was derived from (for a union, the closest
	// group both operands are stored relative to; nil for the world and
	// when there is none) and parentRanks the members' ranks in the
	// parent, when parent is not nil: every member is then a member of
	// parent, and world[i] == parent.World(parentRanks[i]).
	// A sparse module may store the group relative to parent (or one of
	// parent's own ancestors); it must not keep the slices it is given.
	New(world []int, parent *Group, parentRanks []int) Store
}

// Component is what a group component implements.
type Component interface {
	mca.Component
	// Query is called once per instance, after Open. It returns the
	// component's priority and module, or an error wrapping
	// mca.ErrDeclined.
	Query(b *mca.Base) (priority int, m Module, err error)
}

// Select picks the instance's group store module. Before selecting it
// checks that a request for sparse groups can be honoured: the sparse
// component cannot see that the group parameter excluded it (an excluded
// component is never opened or queried), so the framework does.
func Select(b *mca.Base) (Module, *mca.Entry, error) {
	if err := checkSparseRequest(b); err != nil {
		return nil, nil, err
	}
	sel, err := mca.Select(b, Framework, func(c mca.Component) (int, Module, error) {
		return c.(Component).Query(b)
	})
	if err != nil {
		return nil, nil, err
	}
	return sel[0].Module, sel[0].Entry, nil
}

// checkSparseRequest refuses mpi_use_sparse_groups=1 together with a group
// parameter that excludes the sparse component: silently storing groups
// densely would hide the memory the user asked to save.
func checkSparseRequest(b *mca.Base) error {
	v := b.Lookup(SparseGroupsParam)
	if !v.Bool() {
		return nil
	}
	for _, e := range b.Catalog().Components(Framework.Name) {
		if e.Info.Name != SparseComponent {
			continue
		}
		if b.Excluded(e) != "" {
			sel := b.Lookup(Framework.Name)
			return mpierr.Errorf(mpierr.ErrUnsupportedParam,
				"%s = %s (source: %s) asks for sparse group storage, but %s = %q (source: %s) excludes the %s component; "+
					"unset one of the two, or let %s include %s",
				SparseGroupsParam, v.String(), v.Source, Framework.Name, sel.String(), sel.Source,
				SparseComponent, Framework.Name, SparseComponent)
		}
		return nil
	}
	return mpierr.Errorf(mpierr.ErrUnsupportedParam,
		"%s = %s (source: %s) asks for sparse group storage, but this build has no %s %s component (%s components: %v)",
		SparseGroupsParam, v.String(), v.Source, Framework.Name, SparseComponent, Framework.Name, componentNames(b))
}

func componentNames(b *mca.Base) []string {
	var names []string
	for _, e := range b.Catalog().Components(Framework.Name) {
		names = append(names, e.Info.Name)
	}
	return names
}
