package group_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gompi/gompi/components/group/dense"
	"github.com/gompi/gompi/components/group/sparse"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/mpierr"
)

// The reference model: a group is the list of its members' world ranks, and
// every operation is the MPI definition written the obvious way.

func refValidate(n int, ranks []int) mpierr.Class {
	seen := map[int]bool{}
	for _, r := range ranks {
		if r < 0 || r >= n || seen[r] {
			return mpierr.ErrRank
		}
		seen[r] = true
	}
	return mpierr.Success
}

func refIncl(g, ranks []int) ([]int, mpierr.Class) {
	if c := refValidate(len(g), ranks); c != mpierr.Success {
		return nil, c
	}
	out := []int{}
	for _, r := range ranks {
		out = append(out, g[r])
	}
	return out, mpierr.Success
}

func refExcl(g, ranks []int) ([]int, mpierr.Class) {
	if c := refValidate(len(g), ranks); c != mpierr.Success {
		return nil, c
	}
	out := []int{}
	for i, w := range g {
		if !slices.Contains(ranks, i) {
			out = append(out, w)
		}
	}
	return out, mpierr.Success
}

func refExpand(n int, ranges [][3]int) ([]int, mpierr.Class) {
	var out []int
	for _, t := range ranges {
		first, last, stride := t[0], t[1], t[2]
		if stride == 0 || first > last && stride > 0 || first < last && stride < 0 {
			return nil, mpierr.ErrArg
		}
		for r := first; stride > 0 && r <= last || stride < 0 && r >= last; r += stride {
			if r < 0 || r >= n || slices.Contains(out, r) {
				return nil, mpierr.ErrRank
			}
			out = append(out, r)
		}
	}
	return out, mpierr.Success
}

func refUnion(a, b []int) []int {
	out := slices.Clone(a)
	for _, w := range b {
		if !slices.Contains(a, w) {
			out = append(out, w)
		}
	}
	return out
}

func refFilter(a, b []int, keep bool) []int {
	out := []int{}
	for _, w := range a {
		if slices.Contains(b, w) == keep {
			out = append(out, w)
		}
	}
	return out
}

func refTranslate(a []int, ranks []int, b []int) ([]int, mpierr.Class) {
	out := []int{}
	for _, r := range ranks {
		switch {
		case r == group.ProcNull:
			out = append(out, group.ProcNull)
		case r < 0 || r >= len(a):
			return nil, mpierr.ErrRank
		default:
			i := slices.Index(b, a[r])
			if i < 0 {
				i = group.Undefined
			}
			out = append(out, i)
		}
	}
	return out, mpierr.Success
}

func refCompare(a, b []int) group.Comparison {
	switch {
	case slices.Equal(a, b):
		return group.Ident
	case len(a) == len(b) && len(refFilter(a, b, true)) == len(a):
		return group.Similar
	}
	return group.Unequal
}

// entry is one group in every representation.
type entry struct {
	ref  []int
	d, s *group.Group
}

// genRanks makes a rank list over a group of n members, in one of the
// shapes that lead to each format, sometimes invalid.
func genRanks(rng *rand.Rand, n int) []int {
	var out []int
	switch rng.IntN(6) {
	case 0: // random order
		k := rng.IntN(n + 1)
		out = rng.Perm(n)[:k]
	case 1: // ascending random subset: bitmap
		for r := 0; r < n; r++ {
			if rng.IntN(4) == 0 {
				out = append(out, r)
			}
		}
	case 2: // a block: range
		a := rng.IntN(n)
		out = make([]int, rng.IntN(n-a)+1)
		for i := range out {
			out[i] = a + i
		}
	case 3: // arithmetic, either way: stride
		first, stride := rng.IntN(n), rng.IntN(5)+1
		if rng.IntN(2) == 0 {
			stride = -stride
		}
		for r := first; r >= 0 && r < n; r += stride {
			out = append(out, r)
		}
	case 4: // a few blocks in random order: ranges
		for _, b := range rng.Perm(4) {
			lo, hi := b*n/4, (b+1)*n/4
			if hi > lo && rng.IntN(3) > 0 {
				for r := lo; r < hi-rng.IntN(hi-lo); r++ {
					out = append(out, r)
				}
			}
		}
	case 5: // everything in order, or none
		if rng.IntN(2) == 0 {
			out = rng.Perm(n)[:0]
		} else {
			for r := range n {
				out = append(out, r)
			}
		}
	}
	if rng.IntN(12) == 0 { // invalid: out of range or duplicated
		switch {
		case len(out) > 0 && rng.IntN(2) == 0:
			out = append(out, out[rng.IntN(len(out))])
		case rng.IntN(2) == 0:
			out = append(out, n+rng.IntN(3))
		default:
			out = append(out, -1-rng.IntN(2))
		}
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

func genTriplets(rng *rand.Rand, n int) [][3]int {
	var out [][3]int
	for range rng.IntN(4) {
		first := rng.IntN(n+2) - 1
		stride := rng.IntN(4) + 1
		if rng.IntN(2) == 0 {
			stride = -stride
		}
		if rng.IntN(30) == 0 {
			stride = 0
		}
		count := rng.IntN(n/2+2) + 1
		last := first + (count-1)*stride
		if stride != 0 {
			slack := rng.IntN(max(stride, -stride))
			if stride < 0 {
				slack = -slack
			}
			last += slack
		}
		if rng.IntN(30) == 0 {
			last = first - last // a sign that may not match the stride
		}
		out = append(out, [3]int{first, last, stride})
	}
	return out
}

func members(g *group.Group) []int {
	out := []int{}
	for i := 0; i < g.Size(); i++ {
		out = append(out, g.World(i))
	}
	return out
}

func depth(g *group.Group) int {
	d := 0
	for {
		p, ok := g.Store().(group.Derived)
		if !ok {
			return d
		}
		d++
		g = p.Parent()
	}
}

// TestDenseSparseProperty applies random sequences of operations with the
// dense and the sparse module and checks both against the reference model:
// same members in the same order, same ranks, translations, comparisons and
// errors.
func TestDenseSparseProperty(t *testing.T) {
	sequences := 10000
	if testing.Short() {
		sequences = 1000
	}
	formats := map[string]int{}
	maxDepth := 0
	for seq := range sequences {
		rng := rand.New(rand.NewPCG(uint64(seq), 0x9e3779b97f4a7c15))
		world := 1 + rng.IntN(40)
		if rng.IntN(10) == 0 {
			world = 500 + rng.IntN(700) // several bitmap blocks
		}
		me := rng.IntN(world)
		dops := group.Ops{Module: dense.Module{}, Me: me}
		sops := group.Ops{Module: sparse.Module{}, Me: me}
		dw, err1 := dops.World(world)
		sw, err2 := sops.World(world)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		ref := make([]int, world)
		for i := range ref {
			ref[i] = i
		}
		pool := []entry{{ref, dw, sw}, {[]int{}, group.Empty(), group.Empty()}}
		for step := range 1 + rng.IntN(8) {
			a, b := pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
			if rng.IntN(2) == 0 {
				a = pool[len(pool)-1] // derive from the newest: chains
			}
			var want []int
			var wantClass mpierr.Class
			var d, s *group.Group
			var derr, serr error
			var what string
			switch op := rng.IntN(7); op {
			case 0:
				ranks := genRanks(rng, max(len(a.ref), 1))
				what = fmt.Sprintf("incl %v", ranks)
				want, wantClass = refIncl(a.ref, ranks)
				d, derr = dops.Incl(a.d, ranks)
				s, serr = sops.Incl(a.s, ranks)
			case 1:
				ranks := genRanks(rng, max(len(a.ref), 1))
				what = fmt.Sprintf("excl %v", ranks)
				want, wantClass = refExcl(a.ref, ranks)
				d, derr = dops.Excl(a.d, ranks)
				s, serr = sops.Excl(a.s, ranks)
			case 2, 3:
				tr := genTriplets(rng, max(len(a.ref), 1))
				ranks, c := refExpand(len(a.ref), tr)
				if op == 2 {
					what = fmt.Sprintf("range incl %v", tr)
					d, derr = dops.RangeIncl(a.d, tr)
					s, serr = sops.RangeIncl(a.s, tr)
					want = ranks
					if c == mpierr.Success {
						want, c = refIncl(a.ref, ranks)
					}
				} else {
					what = fmt.Sprintf("range excl %v", tr)
					d, derr = dops.RangeExcl(a.d, tr)
					s, serr = sops.RangeExcl(a.s, tr)
					if c == mpierr.Success {
						want, c = refExcl(a.ref, ranks)
					}
				}
				wantClass = c
			case 4:
				what = "union"
				want = refUnion(a.ref, b.ref)
				d, derr = dops.Union(a.d, b.d)
				s, serr = sops.Union(a.s, b.s)
			case 5:
				what = "intersection"
				want = refFilter(a.ref, b.ref, true)
				d, derr = dops.Intersection(a.d, b.d)
				s, serr = sops.Intersection(a.s, b.s)
			case 6:
				what = "difference"
				want = refFilter(a.ref, b.ref, false)
				d, derr = dops.Difference(a.d, b.d)
				s, serr = sops.Difference(a.s, b.s)
			}
			where := fmt.Sprintf("sequence %d (world %d, me %d) step %d: %s of %v (and %v)", seq, world, me, step, what, a.ref, b.ref)
			if wantClass != mpierr.Success {
				if mpierr.ClassOf(derr) != wantClass || mpierr.ClassOf(serr) != wantClass {
					t.Fatalf("%s: errors %v / %v, want class %s", where, derr, serr, wantClass.Name())
				}
				continue
			}
			if derr != nil || serr != nil {
				t.Fatalf("%s: errors %v / %v", where, derr, serr)
			}
			e := entry{want, d, s}
			checkEntry(t, where, e, world, me)
			formats[s.Store().Format()]++
			maxDepth = max(maxDepth, depth(s))
			for _, o := range pool {
				checkPair(t, rng, where, e, o)
				checkPair(t, rng, where, o, e)
			}
			pool = append(pool, e)
		}
	}
	t.Logf("sparse formats stored: %v; deepest chain %d", formats, maxDepth)
	for _, f := range []string{sparse.Dense, sparse.Range, sparse.Stride, sparse.Bitmap} {
		if formats[f] == 0 {
			t.Errorf("no group was stored as %s: the generator does not exercise it", f)
		}
	}
	if maxDepth < 3 {
		t.Errorf("the deepest sparse chain is %d: the generator does not exercise chains", maxDepth)
	}
}

func checkEntry(t *testing.T, where string, e entry, world, me int) {
	t.Helper()
	for name, g := range map[string]*group.Group{"dense": e.d, "sparse": e.s} {
		if got := members(g); !slices.Equal(got, e.ref) {
			t.Fatalf("%s: %s members %v, want %v", where, name, got, e.ref)
		}
		if len(e.ref) == 0 && g != group.Empty() {
			t.Fatalf("%s: %s empty result is not group.Empty()", where, name)
		}
		wantMe := slices.Index(e.ref, me)
		if wantMe < 0 {
			wantMe = group.Undefined
		}
		if g.MyRank() != wantMe {
			t.Fatalf("%s: %s my rank %d, want %d", where, name, g.MyRank(), wantMe)
		}
		for w := -2; w <= world; w++ {
			want := slices.Index(e.ref, w)
			if want < 0 {
				want = group.Undefined
			}
			if got := g.Rank(w); got != want {
				t.Fatalf("%s: %s Rank(%d) = %d, want %d (members %v, format %s)", where, name, w, got, want, e.ref, g.Store().Format())
			}
		}
	}
	if e.d.Store().Format() != "dense" {
		t.Fatalf("%s: the dense module stored %s", where, e.d.Store().Format())
	}
}

// checkPair compares translations and comparisons from a to b.
func checkPair(t *testing.T, rng *rand.Rand, where string, a, b entry) {
	t.Helper()
	ranks := []int{group.ProcNull}
	for range 4 {
		if len(a.ref) > 0 {
			ranks = append(ranks, rng.IntN(len(a.ref)))
		}
	}
	rng.Shuffle(len(ranks), func(i, j int) { ranks[i], ranks[j] = ranks[j], ranks[i] })
	want, _ := refTranslate(a.ref, ranks, b.ref)
	dt, derr := group.TranslateRanks(a.d, ranks, b.d)
	st, serr := group.TranslateRanks(a.s, ranks, b.s)
	if derr != nil || serr != nil || !slices.Equal(dt, want) || !slices.Equal(st, want) {
		t.Fatalf("%s: translate %v of %v to %v: dense %v %v, sparse %v %v, want %v", where, ranks, a.ref, b.ref, dt, derr, st, serr, want)
	}
	wc := refCompare(a.ref, b.ref)
	dc, derr := group.Compare(a.d, b.d)
	sc, serr := group.Compare(a.s, b.s)
	if derr != nil || serr != nil || dc != wc || sc != wc {
		t.Fatalf("%s: compare %v with %v: dense %v, sparse %v, want %v", where, a.ref, b.ref, dc, sc, wc)
	}
}
