package sparse

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gompi/gompi/frameworks/group"
)

func world(t testing.TB, n int) (group.Ops, *group.Group) {
	t.Helper()
	o := group.Ops{Module: Module{}, Me: 0}
	w, err := o.World(n)
	if err != nil {
		t.Fatal(err)
	}
	return o, w
}

// must returns a function that fails t on an error and returns the group.
func must(t testing.TB) func(*group.Group, error) *group.Group {
	return func(g *group.Group, err error) *group.Group {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
}

// hops counts the stores a lookup walks through before the dense one.
func hops(g *group.Group) int {
	n := 0
	for {
		d, ok := g.Store().(group.Derived)
		if !ok {
			return n
		}
		n++
		g = d.Parent()
	}
}

// verify checks every lookup of g against its members' world ranks.
func verify(t *testing.T, g *group.Group, want []int, worldSize int) {
	t.Helper()
	if g.Size() != len(want) {
		t.Fatalf("size %d, want %d", g.Size(), len(want))
	}
	for r, w := range want {
		if got := g.World(r); got != w {
			t.Fatalf("World(%d) = %d, want %d (%s)", r, got, w, g.Store().Format())
		}
	}
	for w := -1; w <= worldSize; w++ {
		want := slices.Index(want, w)
		if want < 0 {
			want = group.Undefined
		}
		if got := g.Rank(w); got != want {
			t.Fatalf("Rank(%d) = %d, want %d (%s)", w, got, want, g.Store().Format())
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

func TestFormats(t *testing.T) {
	mk := must(t)
	o, w := world(t, 1000)
	rng := rand.New(rand.NewPCG(1, 2))
	var tenth []int
	for r := range 1000 {
		if rng.IntN(10) == 0 {
			tenth = append(tenth, r)
		}
	}
	evens := mk(o.RangeIncl(w, [][3]int{{0, 999, 2}}))
	cases := []struct {
		name   string
		g      *group.Group
		want   []int
		format string
		bytes  int
		hops   int
	}{
		{"world stays dense", w, seq(0, 1, 1000), Dense, 4000, 0},
		{"every other rank", evens, seq(0, 2, 500), Stride, 12, 1},
		{"contiguous half", mk(o.RangeIncl(w, [][3]int{{0, 499, 1}})), seq(0, 1, 500), Range, 8, 1},
		{"reversed world", mk(o.RangeIncl(w, [][3]int{{999, 0, -1}})), seq(999, -1, 1000), Stride, 12, 1},
		{"random tenth", mk(o.Incl(w, tenth)), tenth, Bitmap, 8*16 + 4*1, 1},
		{"two blocks, second first", mk(o.RangeIncl(w, [][3]int{{500, 599, 1}, {0, 99, 1}})),
			append(seq(500, 1, 100), seq(0, 1, 100)...), Range, 16, 1},
		{"one member stays dense", mk(o.Incl(w, []int{7})), []int{7}, Dense, 4, 0},
		{"two consecutive members: a tie, dense wins", mk(o.Incl(w, []int{7, 8})), []int{7, 8}, Dense, 8, 0},
		{"three in a stride: a tie, dense wins", mk(o.Incl(w, []int{1, 5, 9})), []int{1, 5, 9}, Dense, 12, 0},
		{"four consecutive: a range", mk(o.Incl(w, []int{3, 4, 5, 6})), []int{3, 4, 5, 6}, Range, 8, 1},
		{"every other of every other: a stride in the world", mk(o.RangeIncl(evens, [][3]int{{0, 499, 2}})), seq(0, 4, 250), Stride, 12, 1},
		{"union of blocks: relative to the world", mk(o.Union(
			mk(o.RangeIncl(w, [][3]int{{0, 99, 1}})), mk(o.RangeIncl(evens, [][3]int{{400, 449, 1}})))),
			append(seq(0, 1, 100), seq(800, 2, 50)...), Bitmap, 132, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			verify(t, c.g, c.want, 1000)
			if f := c.g.Store().Format(); f != c.format || c.g.Store().Bytes() != c.bytes || hops(c.g) != c.hops {
				t.Errorf("stored as %s, %d bytes, %d hops; want %s, %d, %d", f, c.g.Store().Bytes(), hops(c.g), c.format, c.bytes, c.hops)
			}
		})
	}
}

func TestSizesOf(t *testing.T) {
	cases := []struct {
		ranks []int
		p     int
		want  Sizes
	}{
		{[]int{5}, 10, Sizes{Dense: 4, Range: 8, Stride: 12, Bitmap: 8}},
		{[]int{0, 2, 4, 6}, 8, Sizes{Dense: 16, Range: 32, Stride: 12, Bitmap: 8}},
		{[]int{6, 4, 2, 0}, 8, Sizes{Dense: 16, Range: 32, Stride: 12, Bitmap: -1}},
		{[]int{0, 1, 2, 7}, 8, Sizes{Dense: 16, Range: 16, Stride: -1, Bitmap: 8}},
		{[]int{3, 1, 2}, 8, Sizes{Dense: 12, Range: 16, Stride: -1, Bitmap: -1}},
		{[]int{0}, 512, Sizes{Dense: 4, Range: 8, Stride: 12, Bitmap: 64}},
		{[]int{0}, 513, Sizes{Dense: 4, Range: 8, Stride: 12, Bitmap: 72 + 4}},
		{[]int{0}, 1 << 20, Sizes{Dense: 4, Range: 8, Stride: 12, Bitmap: 1<<17 + 4*2047}},
	}
	for _, c := range cases {
		if got := SizesOf(c.ranks, c.p); got != c.want {
			t.Errorf("SizesOf(%v, %d) = %+v, want %+v", c.ranks, c.p, got, c.want)
		}
	}
}

// The bitmap's parent size is not a multiple of 8 (nor of 64, nor of 512),
// and the members sit at the edges of words and blocks.
func TestBitmapEdges(t *testing.T) {
	mk := must(t)
	for _, p := range []int{13, 63, 64, 65, 511, 512, 513, 1003, 2049} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			var ranks []int
			for r := range p {
				if r%64 == 0 || r%64 == 63 || r%512 == 511 || r == p-1 || r%7 == 3 {
					ranks = append(ranks, r)
				}
			}
			o, w := world(t, p)
			g := mk(o.Incl(w, ranks))
			verify(t, g, ranks, p)
			if p >= 64 && g.Store().Format() != Bitmap {
				t.Errorf("stored as %s", g.Store().Format())
			}
		})
	}
}

// A chain incl(incl(incl(world))) whose every level is smallest relative to
// its own parent: lookups walk three sparse groups to the world.
func TestChainDepth(t *testing.T) {
	mk := must(t)
	const n = 4096
	o, w := world(t, n)
	rng := rand.New(rand.NewPCG(3, 4))
	g, ref := w, seq(0, 1, n)
	for level := 1; level <= 4; level++ {
		var ranks []int
		for r := range g.Size() {
			if rng.IntN(4) == 0 {
				ranks = append(ranks, r)
			}
		}
		g = mk(o.Incl(g, ranks))
		next := make([]int, len(ranks))
		for i, r := range ranks {
			next[i] = ref[r]
		}
		ref = next
		verify(t, g, ref, n)
		if g.Store().Format() != Bitmap || hops(g) != level {
			t.Errorf("level %d stored as %s with %d hops", level, g.Store().Format(), hops(g))
		}
	}
	// A reversal of the deepest group is a stride of it (12 bytes; dense
	// would take 4 per member, and no ancestor holds it in order).
	rev := mk(o.RangeIncl(g, [][3]int{{g.Size() - 1, 0, -1}}))
	slices.Reverse(ref)
	verify(t, rev, ref, n)
	if g.Size() <= 3 {
		t.Fatalf("the deepest group has %d members: dense is no bigger than a stride", g.Size())
	}
	if f, h := rev.Store().Format(), hops(rev); f != Stride || h != 5 {
		t.Errorf("the reversed deepest group (%d members) is stored as %s with %d hops, want a stride of it (5 hops)", rev.Size(), f, h)
	}
}

func TestEveryOtherRankOf1MTakesAtMost64Bytes(t *testing.T) {
	mk := must(t)
	const n = 1 << 20
	o, w := world(t, n)
	g := mk(o.RangeIncl(w, [][3]int{{0, n - 1, 2}}))
	if b := g.Store().Bytes(); b > 64 {
		t.Fatalf("every other rank of %d takes %d bytes (%s), want <= 64", n, b, g.Store().Format())
	}
	if g.Size() != n/2 || g.World(12345) != 24690 || g.Rank(24690) != 12345 || g.Rank(24691) != group.Undefined {
		t.Fatal("lookups are wrong")
	}
	// The odd ranks, by exclusion, take the same.
	odd := mk(o.Excl(w, seq(0, 2, n/2)))
	if b := odd.Store().Bytes(); b > 64 || odd.World(0) != 1 {
		t.Fatalf("the odd ranks take %d bytes (%s)", b, odd.Store().Format())
	}
}

// TestBytesPerFormat reports the bytes per group of each format for the
// issue's patterns; -1 marks a format that cannot hold the group. The
// sparse column is what the module stores (format, hops to the dense
// world). Run with -v to see the table.
func TestBytesPerFormat(t *testing.T) {
	mk := must(t)
	sizes := []int{1 << 10, 1 << 16, 1 << 20}
	if testing.Short() {
		sizes = sizes[:2]
	}
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	add("%-22s %8s %8s | %9s %9s %7s %9s | %s", "pattern", "world", "members", "dense", "range", "stride", "bitmap", "sparse stores")
	for _, n := range sizes {
		o, w := world(t, n)
		rng := rand.New(rand.NewPCG(uint64(n), 5))
		row := func(name string, parent *group.Group, ranks []int) *group.Group {
			g := mk(o.Incl(parent, ranks))
			s := SizesOf(ranks, parent.Size())
			add("%-22s %8d %8d | %9d %9d %7d %9d | %s %d B, %d hops", name, n, len(ranks),
				s.Dense, s.Range, s.Stride, s.Bitmap, g.Store().Format(), g.Store().Bytes(), hops(g))
			best := s.Dense
			for _, b := range []int{s.Range, s.Stride, s.Bitmap} {
				if b >= 0 && b < best {
					best = b
				}
			}
			// Relative to its parent the module can do no worse than the
			// best format (it may do better through an ancestor).
			if g.Store().Bytes() > best {
				t.Errorf("%s at %d: stored in %d bytes, but %d was possible", name, n, g.Store().Bytes(), best)
			}
			return g
		}
		row("every other rank", w, seq(0, 2, n/2))
		row("contiguous half", w, seq(0, 1, n/2))
		var tenth []int
		for r := range n {
			if rng.IntN(10) == 0 {
				tenth = append(tenth, r)
			}
		}
		row("random 10%", w, tenth)
		// A 3-level derivation: the odd ranks, the second half of those, a
		// random 10% of that. Sizes are relative to each level's parent.
		l1 := row("chain 1: odd ranks", w, seq(1, 2, n/2))
		l2 := row("chain 2: its 2nd half", l1, seq(n/4, 1, n/4))
		var pick []int
		for r := range l2.Size() {
			if rng.IntN(10) == 0 {
				pick = append(pick, r)
			}
		}
		l3 := row("chain 3: random 10%", l2, pick)
		total := l1.Store().Bytes() + l2.Store().Bytes() + l3.Store().Bytes()
		add("%-22s %8d %8s | %9d %29s | %d B", "chain total", n, "", 4*(l1.Size()+l2.Size()+l3.Size()), "", total)
	}
	t.Log("bytes per group, by format:\n" + strings.Join(lines, "\n"))
}
