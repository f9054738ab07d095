package group

import (
	"errors"
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

// denseMod stores every group densely, like components/group/dense (which
// this package cannot import).
type denseMod struct{}

func (denseMod) New(world []int, _ *Group, _ []int) Store { return NewDense(world) }

func worldOps(t *testing.T, size, me int) (Ops, *Group) {
	t.Helper()
	o := Ops{Module: denseMod{}, Me: me}
	w, err := o.World(size)
	if err != nil {
		t.Fatal(err)
	}
	return o, w
}

func membersOf(g *Group) []int { return members(g) }

func wantClass(t *testing.T, err error, c mpierr.Class, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", c.Name())
	}
	if !errors.Is(err, c) || mpierr.ClassOf(err) != c {
		t.Fatalf("error %q has class %v, want %v", err, mpierr.ClassOf(err).Name(), c.Name())
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}

func TestExpandRanges(t *testing.T) {
	const maxI, minI = math.MaxInt, math.MinInt
	cases := []struct {
		name   string
		size   int
		ranges [][3]int
		want   []int
		class  mpierr.Class
		parts  []string
	}{
		{"none", 5, nil, nil, 0, nil},
		{"none of an empty group", 0, [][3]int{}, nil, 0, nil},
		{"all", 5, [][3]int{{0, 4, 1}}, []int{0, 1, 2, 3, 4}, 0, nil},
		{"reversed", 5, [][3]int{{4, 0, -1}}, []int{4, 3, 2, 1, 0}, 0, nil},
		{"odd ranks", 6, [][3]int{{1, 5, 2}}, []int{1, 3, 5}, 0, nil},
		{"1:n-1:2 with n-1 even", 5, [][3]int{{1, 4, 2}}, []int{1, 3}, 0, nil},
		{"n-1:1:-2", 5, [][3]int{{4, 1, -2}}, []int{4, 2}, 0, nil},
		{"single with any stride", 5, [][3]int{{3, 3, -7}}, []int{3}, 0, nil},
		{"single with a huge stride", 5, [][3]int{{3, 3, maxI}}, []int{3}, 0, nil},
		{"stride past last", 5, [][3]int{{1, 3, 9}}, []int{1}, 0, nil},
		{"triplet order", 6, [][3]int{{5, 4, -1}, {0, 2, 2}}, []int{5, 4, 0, 2}, 0, nil},
		{"last == size, computed ranks valid", 5, [][3]int{{0, 5, 2}}, []int{0, 2, 4}, 0, nil},
		{"last far past the end, computed ranks valid", 5, [][3]int{{1, maxI, maxI}}, []int{1}, 0, nil},
		{"last far below, computed ranks valid", 5, [][3]int{{1, minI + 2, minI}}, []int{1}, 0, nil},
		{"last far below, second rank computed", 5, [][3]int{{1, minI, minI}}, nil, mpierr.ErrRank, []string{"computes rank -9223372036854775807"}},

		{"stride 0", 5, [][3]int{{0, 4, 0}}, nil, mpierr.ErrArg, []string{"triplet 0 (first 0, last 4, stride 0)", "must not be 0"}},
		{"first > last, positive stride", 5, [][3]int{{4, 0, 2}}, nil, mpierr.ErrArg, []string{"first > last needs a negative stride"}},
		{"first < last, negative stride", 5, [][3]int{{0, 4, -1}}, nil, mpierr.ErrArg, []string{"first < last needs a positive stride"}},
		{"last == size computed", 5, [][3]int{{0, 5, 1}}, nil, mpierr.ErrRank, []string{"computes rank 5", "ranks 0..4"}},
		{"first == size", 5, [][3]int{{5, 5, 1}}, nil, mpierr.ErrRank, []string{"first rank 5 is out of range", "ranks 0..4"}},
		{"first negative", 5, [][3]int{{-1, 3, 1}}, nil, mpierr.ErrRank, []string{"first rank -1"}},
		{"below zero", 5, [][3]int{{2, -3, -1}}, nil, mpierr.ErrRank, []string{"computes rank -3"}},
		{"huge span", 5, [][3]int{{0, maxI, 1}}, nil, mpierr.ErrRank, []string{"computes rank 9223372036854775807"}},
		{"huge negative span", 5, [][3]int{{0, minI, minI}}, nil, mpierr.ErrRank, []string{"computes rank -9223372036854775808"}},
		{"huge negative span, small stride", 5, [][3]int{{4, minI, -1}}, nil, mpierr.ErrRank, []string{"computes rank -9223372036854775808"}},
		{"overlapping triplets", 6, [][3]int{{0, 2, 1}, {4, 2, -1}}, nil, mpierr.ErrRank, []string{"triplet 1 (first 4, last 2, stride -1) computes rank 2", "distinct"}},
		{"the same triplet twice", 6, [][3]int{{0, 5, 2}, {0, 5, 2}}, nil, mpierr.ErrRank, []string{"computes rank 0"}},
		{"empty group", 0, [][3]int{{0, 0, 1}}, nil, mpierr.ErrRank, []string{"the group is empty"}},
		{"second triplet bad", 6, [][3]int{{0, 1, 1}, {3, 2, 1}}, nil, mpierr.ErrArg, []string{"triplet 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ExpandRanges(c.size, c.ranges)
			if c.class != 0 {
				wantClass(t, err, c.class, c.parts...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestRankListErrors(t *testing.T) {
	o, w := worldOps(t, 5, 0)
	cases := []struct {
		name  string
		ranks []int
		parts []string
	}{
		{"out of range", []int{0, 5}, []string{"rank 5 (index 1) is out of range", "ranks 0..4"}},
		{"negative", []int{-1}, []string{"rank -1 (index 0)"}},
		{"Undefined", []int{Undefined}, []string{"out of range"}},
		{"duplicate", []int{1, 2, 1}, []string{"rank 1 appears twice (indexes 0 and 2)", "distinct"}},
		{"more ranks than members", []int{0, 1, 2, 3, 4, 0}, []string{"appears twice"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := o.Incl(w, c.ranks)
			wantClass(t, err, mpierr.ErrRank, c.parts...)
			_, err = o.Excl(w, c.ranks)
			wantClass(t, err, mpierr.ErrRank, c.parts...)
		})
	}
	_, err := o.Incl(nil, []int{0})
	wantClass(t, err, mpierr.ErrGroup, "nil group")
	_, err = o.Union(w, nil)
	wantClass(t, err, mpierr.ErrGroup, "nil group (argument 2)")
	_, err = TranslateRanks(nil, nil, w)
	wantClass(t, err, mpierr.ErrGroup)
	_, err = Compare(w, nil)
	wantClass(t, err, mpierr.ErrGroup)
	_, err = TranslateRanks(w, []int{ProcNull, 5}, w)
	wantClass(t, err, mpierr.ErrRank, "rank 5 (index 1) is not in the first group", "or ProcNull (-2)")
	_, err = o.World(0)
	wantClass(t, err, mpierr.ErrArg, "the size must be in 1..")
}

func TestOpsSemantics(t *testing.T) {
	o, w := worldOps(t, 8, 3)
	must := func(g *Group, err error) *Group {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	check := func(name string, g *Group, want []int, me int) {
		t.Helper()
		if got := membersOf(g); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: members %v, want %v", name, got, want)
		}
		if g.MyRank() != me {
			t.Errorf("%s: my rank %d, want %d", name, g.MyRank(), me)
		}
	}
	check("world", w, []int{0, 1, 2, 3, 4, 5, 6, 7}, 3)
	a := must(o.Incl(w, []int{3, 2, 7}))
	check("incl", a, []int{3, 2, 7}, 0)
	check("excl", must(o.Excl(w, []int{6, 0, 3})), []int{1, 2, 4, 5, 7}, Undefined)
	b := must(o.RangeIncl(w, [][3]int{{7, 0, -3}, {0, 0, 1}}))
	check("range incl", b, []int{7, 4, 1, 0}, Undefined)
	check("range excl", must(o.RangeExcl(w, [][3]int{{7, 0, -3}})), []int{0, 2, 3, 5, 6}, 2)
	check("union", must(o.Union(a, b)), []int{3, 2, 7, 4, 1, 0}, 0)
	check("union reversed", must(o.Union(b, a)), []int{7, 4, 1, 0, 3, 2}, 4)
	check("intersection", must(o.Intersection(b, a)), []int{7}, Undefined)
	check("difference", must(o.Difference(a, b)), []int{3, 2}, 0)
	check("difference all", must(o.Difference(a, a)), nil, Undefined)

	// Results that are an existing group are that group; empty ones the
	// one empty group.
	if g := must(o.Excl(w, nil)); g != w {
		t.Error("excl of nothing is not the group itself")
	}
	if g := must(o.Incl(w, []int{0, 1, 2, 3, 4, 5, 6, 7})); g != w {
		t.Error("incl of everything in order is not the group itself")
	}
	if g := must(o.Excl(w, []int{0, 1, 2, 3, 4, 5, 6, 7})); g != Empty() {
		t.Error("excl of everything is not Empty()")
	}
	if g := must(o.Incl(w, nil)); g != Empty() || g.MyRank() != Undefined || g.Size() != 0 {
		t.Error("incl of nothing is not Empty()")
	}
	if g := must(o.Union(w, Empty())); g != w {
		t.Error("union with the empty group is not the group")
	}

	tr, err := TranslateRanks(a, []int{0, ProcNull, 2, 1}, w)
	if err != nil || !slices.Equal(tr, []int{3, ProcNull, 7, 2}) {
		t.Errorf("translate a→world = %v, %v", tr, err)
	}
	tr, err = TranslateRanks(w, []int{0, 7, 3, ProcNull}, b)
	if err != nil || !slices.Equal(tr, []int{3, 0, Undefined, ProcNull}) {
		t.Errorf("translate world→b = %v, %v", tr, err)
	}
	tr, err = TranslateRanks(Empty(), []int{ProcNull}, w)
	if err != nil || !slices.Equal(tr, []int{ProcNull}) {
		t.Errorf("translate ProcNull from the empty group = %v, %v", tr, err)
	}
	for _, c := range []struct {
		a, b *Group
		want Comparison
	}{
		{w, w, Ident},
		{a, must(o.Incl(w, []int{3, 2, 7})), Ident},
		{a, must(o.Incl(w, []int{7, 3, 2})), Similar},
		{a, b, Unequal},
		{Empty(), Empty(), Ident},
		{Empty(), a, Unequal},
		{must(o.Incl(w, []int{3, 4})), must(o.Incl(w, []int{3, 2})), Unequal},
	} {
		if got, err := Compare(c.a, c.b); got != c.want || err != nil {
			t.Errorf("compare %v %v = %v, %v; want %v", membersOf(c.a), membersOf(c.b), got, err, c.want)
		}
	}
}

func TestDenseReverseLookup(t *testing.T) {
	cases := []struct {
		name  string
		world []int
		kind  string // "" means no index is ever built
	}{
		{"world", []int{0, 1, 2, 3, 4, 5}, ""},
		{"block", []int{10, 11, 12}, ""},
		{"shuffled, compact", []int{4, 2, 5, 3}, "direct"},
		{"spread", []int{1000, 3, 500000, 7}, "sorted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewDense(c.world).(*denseStore)
			for _, w := range []int{-1, math.MinInt, math.MaxInt, 999, 6, 11} {
				if !slices.Contains(c.world, w) && s.Rank(w) != Undefined {
					t.Errorf("Rank(%d) = %d for a non-member", w, s.Rank(w))
				}
			}
			for r, w := range c.world {
				if got := s.Rank(w); got != r {
					t.Errorf("Rank(%d) = %d, want %d", w, got, r)
				}
			}
			switch {
			case c.kind == "" && s.reverseBuilt():
				t.Error("a contiguous store built a reverse index")
			case c.kind == "direct" && s.direct == nil, c.kind == "sorted" && s.sorted == nil:
				t.Errorf("index is not %s", c.kind)
			}
			if s.Bytes() != 4*len(c.world) || s.Format() != "dense" {
				t.Errorf("Bytes %d Format %s", s.Bytes(), s.Format())
			}
		})
	}
}

// TestWorldInlines keeps the lookup inlinable: the PML calls it per message.
func TestWorldInlines(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gobin, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, want := range []string{"can inline (*Group).World", "inlining call to (*Group).World"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the compiler does not say %q", want)
		}
	}
}

// Groups are shared between goroutines: the lazily built reverse index must
// be built once and safely (run with -race).
func TestConcurrentLookups(t *testing.T) {
	world := []int{9, 3, 7, 1, 5, 100, 42}
	g := New(NewDense(world))
	done := make(chan bool)
	for range 4 {
		go func() {
			ok := true
			for r, w := range world {
				ok = ok && g.Rank(w) == r && g.World(r) == w
			}
			done <- ok
		}()
	}
	for range 4 {
		if !<-done {
			t.Error("a concurrent lookup was wrong")
		}
	}
}
