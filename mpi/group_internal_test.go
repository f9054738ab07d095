package mpi

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gompi/gompi/components/group/dense"
	"github.com/gompi/gompi/components/group/sparse"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/mpierr"
)

// The edge cases of MPI's group operations a test suite should cover,
// numbered. Groups are local, so a world of any
// size is made straight from a module, as Instance.setup does, and every
// case runs with both stores. The cases that need communicators (the group
// of a split or duplicated communicator) are tested here on the groups such
// communicators would have; Comm.Group itself comes with communicators.

var modules = []struct {
	name string
	m    group.Module
}{{"dense", dense.Module{}}, {"sparse", sparse.Module{}}}

// forEachModule runs f with a world of size n as seen by world rank me.
func forEachModule(t *testing.T, n, me int, f func(t *testing.T, world *Group)) {
	for _, mod := range modules {
		t.Run(mod.name, func(t *testing.T) {
			ops := group.Ops{Module: mod.m, Me: me}
			w, err := ops.World(n)
			if err != nil {
				t.Fatal(err)
			}
			f(t, newGroup(ops, w))
		})
	}
}

// ok fails the test on an error and returns the value.
func ok[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func worldRanks(t *testing.T, g *Group) []int {
	t.Helper()
	n := ok[int](t)(g.Size())
	out := make([]int, n)
	for i := range out {
		out[i] = g.g.World(i)
	}
	return out
}

func wantCompare(t *testing.T, g, h *Group, want Comparison) {
	t.Helper()
	if got := ok[Comparison](t)(g.Compare(h)); got != want {
		t.Errorf("compare %v with %v = %v, want %v", worldRanks(t, g), worldRanks(t, h), got, want)
	}
}

func wantErr(t *testing.T, err error, c mpierr.Class, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", c.Name())
	}
	if !errors.Is(err, c) || mpierr.ClassOf(err) != c {
		t.Fatalf("error %q has class %s, want %s", err, mpierr.ClassOf(err).Name(), c.Name())
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}

func seq(first, stride, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i*stride
	}
	return out
}

// 1. incl with self first and a list that differs per rank: size 3, rank 0,
// and translating back gives the list.
func TestEdge01InclSelfFirst(t *testing.T) {
	for _, me := range []int{0, 3, 9} {
		forEachModule(t, 10, me, func(t *testing.T, w *Group) {
			list := []int{me, 2, 7}
			g := ok[*Group](t)(w.Incl(list))
			if n, r := ok[int](t)(g.Size()), ok[int](t)(g.Rank()); n != 3 || r != 0 {
				t.Errorf("size %d rank %d, want 3 and 0", n, r)
			}
			if back := ok[[]int](t)(g.TranslateRanks([]int{0, 1, 2}, w)); !slices.Equal(back, list) {
				t.Errorf("translated back %v, want %v", back, list)
			}
		})
	}
}

// 2. The self group translates to my world rank; the world translates to
// Undefined in the self group except for me.
func TestEdge02TranslateSelfAndWorld(t *testing.T) {
	const n, me = 6, 4
	forEachModule(t, n, me, func(t *testing.T, w *Group) {
		self := ok[*Group](t)(w.Incl([]int{me}))
		if got := ok[[]int](t)(self.TranslateRanks([]int{0}, w)); !slices.Equal(got, []int{me}) {
			t.Errorf("self → world = %v", got)
		}
		got := ok[[]int](t)(w.TranslateRanks(seq(0, 1, n), self))
		want := []int{Undefined, Undefined, Undefined, Undefined, 0, Undefined}
		if !slices.Equal(got, want) {
			t.Errorf("world → self = %v, want %v", got, want)
		}
	})
}

// 3. Excluding every rank returns GroupEmpty itself.
func TestEdge03ExclAllIsGroupEmpty(t *testing.T) {
	forEachModule(t, 7, 0, func(t *testing.T, w *Group) {
		if g := ok[*Group](t)(w.Excl([]int{6, 0, 1, 5, 2, 4, 3})); g != GroupEmpty {
			t.Errorf("excl of all is %v, not GroupEmpty", worldRanks(t, g))
		}
	})
}

// 4. range_incl/range_excl 1:n-1:2 and n-1:1:-2; the union of the included
// and excluded parts; compare(GroupEmpty, non-empty) is Unequal.
func TestEdge04RangesAndUnion(t *testing.T) {
	for _, n := range []int{9, 10} {
		forEachModule(t, n, 0, func(t *testing.T, w *Group) {
			odd := ok[*Group](t)(w.RangeIncl([][3]int{{1, n - 1, 2}}))
			even := ok[*Group](t)(w.RangeExcl([][3]int{{1, n - 1, 2}}))
			if got := worldRanks(t, odd); !slices.Equal(got, seq(1, 2, n/2)) {
				t.Errorf("1:n-1:2 = %v", got)
			}
			if got := worldRanks(t, even); !slices.Equal(got, seq(0, 2, (n+1)/2)) {
				t.Errorf("excl 1:n-1:2 = %v", got)
			}
			down := ok[*Group](t)(w.RangeIncl([][3]int{{n - 1, 1, -2}}))
			wantDown := seq(n-1, -2, n/2)
			if got := worldRanks(t, down); !slices.Equal(got, wantDown) {
				t.Errorf("n-1:1:-2 = %v, want %v", got, wantDown)
			}
			downEx := ok[*Group](t)(w.RangeExcl([][3]int{{n - 1, 1, -2}}))
			wantCompare(t, ok[*Group](t)(even.Union(odd)), w, Similar)
			wantCompare(t, ok[*Group](t)(down.Union(downEx)), w, Similar)
			wantCompare(t, ok[*Group](t)(downEx.Union(down)), w, Similar)
			wantCompare(t, ok[*Group](t)(ok[*Group](t)(w.RangeIncl([][3]int{{0, n - 1, 2}})).Union(odd)), w, Similar)
			wantCompare(t, GroupEmpty, w, Unequal)
			wantCompare(t, w, GroupEmpty, Unequal)
		})
	}
}

// 5. The groups of split and duplicated communicators, as groups: reversed
// order translates rank i to n-1-i and is Similar; a second handle to the
// world is Ident; half the world is Unequal; {me, me+1} and {me, me-1} are
// Unequal.
func TestEdge05SplitGroups(t *testing.T) {
	const n, me = 8, 3
	forEachModule(t, n, me, func(t *testing.T, w *Group) {
		rev := ok[*Group](t)(w.RangeIncl([][3]int{{n - 1, 0, -1}}))
		got := ok[[]int](t)(w.TranslateRanks(seq(0, 1, n), rev))
		if !slices.Equal(got, seq(n-1, -1, n)) {
			t.Errorf("world → reversed = %v", got)
		}
		wantCompare(t, rev, w, Similar)
		w2 := newGroup(w.ops, w.g)
		wantCompare(t, w2, w, Ident)
		wantCompare(t, ok[*Group](t)(w.RangeIncl([][3]int{{0, n/2 - 1, 1}})), w, Unequal)
		wantCompare(t, ok[*Group](t)(w.Incl([]int{me, me + 1})), ok[*Group](t)(w.Incl([]int{me, me - 1})), Unequal)
	})
}

// 6. union(g5, g4) with g4 = world without 0 and g5 = {0} is the world:
// all of the first group comes first.
func TestEdge06UnionOrder(t *testing.T) {
	const n = 6
	forEachModule(t, n, 2, func(t *testing.T, w *Group) {
		g4 := ok[*Group](t)(w.Excl([]int{0}))
		g5 := ok[*Group](t)(w.Excl(seq(1, 1, n-1)))
		wantCompare(t, ok[*Group](t)(g5.Union(g4)), w, Ident)
		wantCompare(t, ok[*Group](t)(w.Union(g4)), w, Ident)
		wantCompare(t, ok[*Group](t)(g4.Union(g5)), w, Similar)
	})
}

// 7. range_excl 1..n-1 is Ident to excl of 1..n-1; intersection(world, g4)
// is Ident to g4.
func TestEdge07RangeExclAndIntersection(t *testing.T) {
	const n = 6
	forEachModule(t, n, 0, func(t *testing.T, w *Group) {
		wantCompare(t, ok[*Group](t)(w.RangeExcl([][3]int{{1, n - 1, 1}})), ok[*Group](t)(w.Excl(seq(1, 1, n-1))), Ident)
		g4 := ok[*Group](t)(w.Excl([]int{0}))
		wantCompare(t, ok[*Group](t)(w.Intersection(g4)), g4, Ident)
	})
}

// 8. range_excl of everything is GroupEmpty.
func TestEdge08RangeExclAll(t *testing.T) {
	forEachModule(t, 5, 0, func(t *testing.T, w *Group) {
		g := ok[*Group](t)(w.RangeExcl([][3]int{{4, 0, -1}}))
		wantCompare(t, g, GroupEmpty, Ident)
		if g != GroupEmpty {
			t.Error("not the GroupEmpty handle")
		}
	})
}

// 9. incl of no ranks (nil) succeeds and is GroupEmpty.
func TestEdge09InclNothing(t *testing.T) {
	forEachModule(t, 5, 0, func(t *testing.T, w *Group) {
		for _, ranks := range [][]int{nil, {}} {
			if g := ok[*Group](t)(w.Incl(ranks)); g != GroupEmpty {
				t.Errorf("incl(%#v) is not GroupEmpty", ranks)
			}
		}
		if g := ok[*Group](t)(w.RangeIncl(nil)); g != GroupEmpty {
			t.Error("range incl of no triplets is not GroupEmpty")
		}
	})
}

// 10. translate_ranks with ProcNull at several positions, between irregular
// groups that defeat any fast path, and into a reversed group.
func TestEdge10TranslateProcNull(t *testing.T) {
	const n = 12
	forEachModule(t, n, 5, func(t *testing.T, w *Group) {
		a := ok[*Group](t)(w.Incl([]int{11, 0, 7, 3, 4, 9}))
		b := ok[*Group](t)(w.Incl([]int{4, 1, 11, 2, 9, 10, 6}))
		got := ok[[]int](t)(a.TranslateRanks([]int{ProcNull, 0, ProcNull, 1, 2, 3, 4, 5, ProcNull}, b))
		want := []int{ProcNull, 2, ProcNull, Undefined, Undefined, Undefined, 0, 4, ProcNull}
		if !slices.Equal(got, want) {
			t.Errorf("a → b = %v, want %v", got, want)
		}
		rev := ok[*Group](t)(w.RangeIncl([][3]int{{n - 1, 0, -1}}))
		got = ok[[]int](t)(a.TranslateRanks([]int{0, ProcNull, 5}, rev))
		if want := []int{0, ProcNull, 2}; !slices.Equal(got, want) {
			t.Errorf("a → reversed = %v, want %v", got, want)
		}
		if got := ok[[]int](t)(a.TranslateRanks(nil, b)); len(got) != 0 {
			t.Errorf("no ranks → %v", got)
		}
	})
}

// 11. 2048 groups without freeing: no limit.
func TestEdge11ManyGroups(t *testing.T) {
	forEachModule(t, 64, 0, func(t *testing.T, w *Group) {
		var gs []*Group
		for i := range 2048 {
			gs = append(gs, ok[*Group](t)(w.Incl([]int{i % 64, (i + 1) % 64})))
		}
		for i, g := range gs {
			if got := worldRanks(t, g); !slices.Equal(got, []int{i % 64, (i + 1) % 64}) {
				t.Fatalf("group %d = %v", i, got)
			}
		}
		for _, g := range gs {
			if err := g.Free(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// 12. An invalid handle (nil, which plays MPI_GROUP_NULL, or freed) is an
// ErrGroup error for every operation, first or second operand.
func TestEdge12InvalidHandles(t *testing.T) {
	forEachModule(t, 4, 0, func(t *testing.T, w *Group) {
		freed := ok[*Group](t)(w.Incl([]int{1, 2}))
		if err := freed.Free(); err != nil {
			t.Fatal(err)
		}
		for name, bad := range map[string]*Group{"nil": nil, "freed": freed} {
			errs := map[string]error{}
			_, errs["Size"] = bad.Size()
			_, errs["Rank"] = bad.Rank()
			_, errs["Incl"] = bad.Incl([]int{0})
			_, errs["Excl"] = bad.Excl(nil)
			_, errs["RangeIncl"] = bad.RangeIncl(nil)
			_, errs["RangeExcl"] = bad.RangeExcl(nil)
			_, errs["Union"] = bad.Union(w)
			_, errs["Union second"] = w.Union(bad)
			_, errs["Intersection"] = bad.Intersection(w)
			_, errs["Intersection second"] = w.Intersection(bad)
			_, errs["Difference"] = bad.Difference(w)
			_, errs["Difference second"] = w.Difference(bad)
			_, errs["TranslateRanks"] = bad.TranslateRanks([]int{0}, w)
			_, errs["TranslateRanks second"] = w.TranslateRanks([]int{0}, bad)
			_, errs["Compare"] = bad.Compare(w)
			_, errs["Compare second"] = GroupEmpty.Compare(bad)
			errs["Free"] = bad.Free()
			for op, err := range errs {
				t.Run(name+" "+op, func(t *testing.T) {
					want := []string{"mpi: Group."}
					if strings.HasSuffix(op, " second") {
						want = append(want, "second group")
					}
					wantErr(t, err, mpierr.ErrGroup, want...)
				})
			}
		}
		// Freeing one handle leaves the others valid, even to the same
		// storage.
		w2 := newGroup(w.ops, w.g)
		if err := w2.Free(); err != nil {
			t.Fatal(err)
		}
		wantCompare(t, w, w, Ident)
	})
}

// GroupEmpty is accepted everywhere, and freeing it does nothing.
func TestGroupEmpty(t *testing.T) {
	forEachModule(t, 4, 1, func(t *testing.T, w *Group) {
		e := GroupEmpty
		if n, r := ok[int](t)(e.Size()), ok[int](t)(e.Rank()); n != 0 || r != Undefined {
			t.Errorf("size %d rank %d", n, r)
		}
		for _, f := range []func() (*Group, error){
			func() (*Group, error) { return e.Incl(nil) },
			func() (*Group, error) { return e.Excl(nil) },
			func() (*Group, error) { return e.RangeIncl(nil) },
			func() (*Group, error) { return e.RangeExcl(nil) },
			func() (*Group, error) { return e.Union(e) },
			func() (*Group, error) { return e.Intersection(w) },
			func() (*Group, error) { return w.Intersection(e) },
			func() (*Group, error) { return e.Difference(w) },
		} {
			if g := ok[*Group](t)(f()); g != GroupEmpty {
				t.Errorf("result %v is not GroupEmpty", worldRanks(t, g))
			}
		}
		for _, f := range []func() (*Group, error){
			func() (*Group, error) { return e.Union(w) },
			func() (*Group, error) { return w.Union(e) },
			func() (*Group, error) { return w.Difference(e) },
		} {
			g := ok[*Group](t)(f())
			wantCompare(t, g, w, Ident)
			if g == w {
				t.Error("the result is the operand's handle, not a new one")
			}
			if r := ok[int](t)(g.Rank()); r != 1 {
				t.Errorf("rank %d in a union with the empty group", r)
			}
		}
		_, err := e.Incl([]int{0})
		wantErr(t, err, mpierr.ErrRank, "the group is empty")
		_, err = e.RangeIncl([][3]int{{0, 0, 1}})
		wantErr(t, err, mpierr.ErrRank)
		_, err = e.TranslateRanks([]int{0}, w)
		wantErr(t, err, mpierr.ErrRank)
		// PROC_NULL stays PROC_NULL even with empty groups (MPI-2.2; Open
		// MPI returns UNDEFINED here).
		if got := ok[[]int](t)(e.TranslateRanks([]int{ProcNull}, w)); !slices.Equal(got, []int{ProcNull}) {
			t.Errorf("ProcNull from GroupEmpty → %v", got)
		}
		if got := ok[[]int](t)(w.TranslateRanks([]int{ProcNull, 0}, e)); !slices.Equal(got, []int{ProcNull, Undefined}) {
			t.Errorf("to GroupEmpty → %v", got)
		}
		wantCompare(t, e, e, Ident)
		for range 3 {
			if err := e.Free(); err != nil {
				t.Fatalf("freeing GroupEmpty: %v", err)
			}
		}
		if n := ok[int](t)(e.Size()); n != 0 {
			t.Error("GroupEmpty changed")
		}
	})
}

// 13. The cases found by reading implementations.
func TestEdge13BadArguments(t *testing.T) {
	const n = 5
	forEachModule(t, n, 0, func(t *testing.T, w *Group) {
		_, err := w.Incl([]int{1, 3, 1})
		wantErr(t, err, mpierr.ErrRank, "mpi: Group.Incl:", "rank 1 appears twice", "distinct")
		_, err = w.Excl([]int{4, 4})
		wantErr(t, err, mpierr.ErrRank, "mpi: Group.Excl:", "rank 4 appears twice")
		// n == size with duplicates must not be taken for "all" (Open MPI
		// returns GROUP_EMPTY).
		_, err = w.Excl([]int{0, 1, 2, 3, 3})
		wantErr(t, err, mpierr.ErrRank)
		_, err = w.Incl([]int{n})
		wantErr(t, err, mpierr.ErrRank, "rank 5 (index 0) is out of range", "ranks 0..4")
		_, err = w.Incl([]int{-1})
		wantErr(t, err, mpierr.ErrRank)
		// last == size: accepted when the computed ranks are valid.
		if got := worldRanks(t, ok[*Group](t)(w.RangeIncl([][3]int{{0, n, 2}}))); !slices.Equal(got, []int{0, 2, 4}) {
			t.Errorf("0:5:2 = %v", got)
		}
		_, err = w.RangeIncl([][3]int{{0, n, 1}})
		wantErr(t, err, mpierr.ErrRank, "computes rank 5")
		_, err = w.RangeIncl([][3]int{{0, 4, 0}})
		wantErr(t, err, mpierr.ErrArg, "mpi: Group.RangeIncl:", "stride must not be 0")
		_, err = w.RangeExcl([][3]int{{4, 0, 1}})
		wantErr(t, err, mpierr.ErrArg, "mpi: Group.RangeExcl:", "first > last needs a negative stride")
		_, err = w.RangeIncl([][3]int{{0, 4, -1}})
		wantErr(t, err, mpierr.ErrArg, "first < last needs a positive stride")
		_, err = w.RangeExcl([][3]int{{0, 2, 1}, {3, 1, -1}})
		wantErr(t, err, mpierr.ErrRank, "computes rank 2", "distinct")
		_, err = w.TranslateRanks([]int{0, n}, w)
		wantErr(t, err, mpierr.ErrRank, "rank 5 (index 1) is not in the first group")
		_, err = w.TranslateRanks([]int{Undefined}, w)
		wantErr(t, err, mpierr.ErrRank)
		// A strided group of one member.
		one := ok[*Group](t)(w.RangeIncl([][3]int{{3, 3, 2}}))
		if got := worldRanks(t, one); !slices.Equal(got, []int{3}) {
			t.Errorf("3:3:2 = %v", got)
		}
	})
}

// 13 (continued): a chain incl(incl(incl(world))) three sparse levels deep,
// and a bitmap whose parent size is not a multiple of 8.
func TestEdge13SparseChainAndBitmap(t *testing.T) {
	const n = 1003
	forEachModule(t, n, 0, func(t *testing.T, w *Group) {
		g, ref := w, seq(0, 1, n)
		rng := rand.New(rand.NewPCG(7, 7))
		for level := range 3 {
			var ranks []int
			for r := range ok[int](t)(g.Size()) {
				if rng.IntN(4) == 0 { // irregular: bitmaps, not strides
					ranks = append(ranks, r)
				}
			}
			g = ok[*Group](t)(g.Incl(ranks))
			next := []int{}
			for _, r := range ranks {
				next = append(next, ref[r])
			}
			ref = next
			if got := worldRanks(t, g); !slices.Equal(got, ref) {
				t.Fatalf("level %d: %v, want %v", level, got, ref)
			}
			back := ok[[]int](t)(w.TranslateRanks(ref, g))
			if !slices.Equal(back, seq(0, 1, len(ref))) {
				t.Fatalf("level %d: world → group %v", level, back)
			}
			if _, sparse := w.ops.Module.(sparse.Module); sparse {
				if format, _, _ := g.Storage(); format != "bitmap" {
					t.Errorf("level %d: %d irregular ranks stored as %s, want bitmap", level, len(ranks), format)
				}
			}
		}
		if _, sparse := w.ops.Module.(sparse.Module); sparse {
			depth := 0
			for s := g.g.Store(); ; depth++ {
				d, ok := s.(group.Derived)
				if !ok {
					break
				}
				s = d.Parent().Store()
			}
			if depth != 3 {
				t.Errorf("the chain is %d sparse levels deep, want 3", depth)
			}
		}
	})
}
