package group_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gompi/gompi/components/group/dense"
	"github.com/gompi/gompi/components/group/sparse"
	"github.com/gompi/gompi/frameworks/group"
)

// The lookup benchmarks share one access pattern: group rank i&mask of a
// group of 1024 members, summed so that nothing is optimised away.
const lookupMask = 1024 - 1

var sink int

// rawTable returns the members' world ranks as a plain slice whose length
// the compiler cannot see, like any table a PML would index (a slice of
// constant length on the stack would lose its bounds check and measure
// something no real lookup does).
//
//go:noinline
func rawTable(n int) []int32 {
	raw := make([]int32, n)
	for i := range raw {
		raw[i] = int32(2 * i)
	}
	return raw
}

// BenchmarkRawSliceIndex is the floor: a plain []int32 index.
func BenchmarkRawSliceIndex(b *testing.B) {
	raw := rawTable(lookupMask + 1)
	s := 0
	for i := 0; i < b.N; i++ {
		s += int(raw[i&lookupMask])
	}
	sink = s
}

// BenchmarkLookupDense goes through the group API (Group.World, inlined)
// on a dense group with the same contents.
func BenchmarkLookupDense(b *testing.B) {
	o := group.Ops{Module: dense.Module{}}
	w, _ := o.World(2 * (lookupMask + 1))
	g, err := o.RangeIncl(w, [][3]int{{0, 2 * lookupMask, 2}})
	if err != nil || g.Store().Format() != "dense" {
		b.Fatal(err)
	}
	s := 0
	for i := 0; i < b.N; i++ {
		s += g.World(i & lookupMask)
	}
	sink = s
}

// BenchmarkLookupSparse is the same lookup on groups the sparse module
// stores, for comparison: one call and one hop per level.
func BenchmarkLookupSparse(b *testing.B) {
	const n = 1 << 16
	o := group.Ops{Module: sparse.Module{}}
	w, _ := o.World(n)
	rng := rand.New(rand.NewPCG(1, 1))
	var tenth []int
	for r := range n {
		if rng.IntN(10) == 0 {
			tenth = append(tenth, r)
		}
	}
	mk := func(g *group.Group, err error) *group.Group {
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	stride := mk(o.RangeIncl(w, [][3]int{{0, n - 1, 2}}))
	odd := mk(o.RangeIncl(w, [][3]int{{1, n - 1, 2}}))
	half := mk(o.RangeIncl(odd, [][3]int{{n / 4, n/2 - 1, 1}}))
	var pick []int
	for r := 0; r < half.Size(); r += 1 + rng.IntN(19) {
		pick = append(pick, r)
	}
	for _, c := range []struct {
		name string
		g    *group.Group
	}{
		{"stride", stride},
		{"range", mk(o.RangeIncl(w, [][3]int{{0, 99, 1}, {4000, 4099, 1}, {200, 1199, 1}}))},
		{"bitmap", mk(o.Incl(w, tenth))},
		{"chain3", mk(o.Incl(half, pick))},
	} {
		b.Run(fmt.Sprintf("%s/%s", c.name, c.g.Store().Format()), func(b *testing.B) {
			mask := 1
			for mask*2 <= c.g.Size() && mask*2 <= lookupMask+1 {
				mask *= 2
			}
			mask--
			s := 0
			for i := 0; i < b.N; i++ {
				s += c.g.World(i & mask)
			}
			sink = s
		})
	}
}

// BenchmarkTranslateToWorld translates 64 ranks of a group into the world
// at growing world sizes: the cost must stay flat (O(ranks), not
// O(world); MPICH's gtranksperf).
func BenchmarkTranslateToWorld(b *testing.B) {
	for _, mod := range []group.Module{dense.Module{}, sparse.Module{}} {
		for _, n := range []int{1 << 10, 1 << 16, 1 << 20} {
			o := group.Ops{Module: mod}
			w, _ := o.World(n)
			g, err := o.RangeIncl(w, [][3]int{{n - 1, 0, -3}})
			if err != nil {
				b.Fatal(err)
			}
			ranks := make([]int, 64)
			for i := range ranks {
				ranks[i] = i * (g.Size() / 64)
			}
			b.Run(fmt.Sprintf("%T/world=%d", mod, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := group.TranslateRanks(g, ranks, w); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("%T/world=%d/reverse", mod, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := group.TranslateRanks(w, ranks, g); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
