package tuned

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

// Every algorithm of every operation matches the reference at sizes 2–17
// and 65 (one rank is self's), every root, in place or not, with
// non-commutative ops for the algorithms that keep rank order.
func TestConformance(t *testing.T) {
	for i, as := range algs {
		op := coll.Op(i)
		for v := 1; v < len(as); v++ {
			a := as[v]
			t.Run(fmt.Sprintf("%s/%s", op, a.name), func(t *testing.T) {
				t.Parallel()
				o := colltest.Options{AllRoots: true, Commutative: a.commutative}
				o.Sizes = []int{65}
				for n := 2; n <= 17; n++ {
					o.Sizes = append(o.Sizes, n)
				}
				if testing.Short() {
					o.Sizes = []int{2, 3, 4, 5, 7, 8, 9, 16}
					o.AllRoots = false
				}
				colltest.Conformance(t, op, withSegment2(a.fn), o)
			})
		}
	}
}

// withSegment2 runs fn with a small bcast segment, so that the pipeline
// cuts even small vectors.
func withSegment2(fn coll.Func) coll.Func {
	return func(c coll.Comm, a *coll.Args) error { return fn(withSegment(c, 24), a) }
}

// The log-time algorithms' rounds (Lamport clocks over the messages), by
// algorithm, exactly:
//   - dissemination barrier, Bruck allgather and Bruck alltoall: ⌈log2 n⌉
//     at every size: every rank sends and receives in every round, so each
//     round adds one to every clock;
//   - binomial bcast, gather and scatter: the depth of the binomial tree,
//     whose deepest rank is the one with the most bits set below n: log2 n
//     on a power of two, ⌊log2 n⌋ = ⌈log2 n⌉-1 otherwise (no rank below n
//     has ⌈log2 n⌉ bits set). The trees alone may take one round fewer;
//   - recursive-doubling allreduce: log2 n on a power of two; otherwise the
//     e = n-p ranks past the largest power of two p fold into partners
//     (newranks 0..e-1, one round), the p double (⌈log2 n⌉-1 rounds) and
//     the partners unfold. Newrank i ends the doubling at max(log2 p,
//     1+popcount(i^j)) over the partners j < e, 1+log2 p = ⌈log2 n⌉ at
//     most; the unfold adds a round only when a partner i < e ends there,
//     i+j = p-1 with i, j < e: e > p/2.
func TestRounds(t *testing.T) {
	ceil := coll.CeilLog2
	tree := func(n int) int {
		if n&(n-1) == 0 {
			return ceil(n)
		}
		return ceil(n) - 1
	}
	folded := func(n int) int {
		if p := coll.Pow2Floor(n); n != p && 2*n > 3*p {
			return ceil(n) + 1
		}
		return ceil(n)
	}
	cases := []struct {
		op     coll.Op
		fn     coll.Func
		rounds func(n int) int
	}{
		{coll.Barrier, barrierDissemination, ceil},
		{coll.Bcast, bcastBinomial, tree},
		{coll.Allgather, allgatherBruck, ceil},
		{coll.Allreduce, allreduceRecursiveDoubling, folded},
		{coll.Alltoall, alltoallBruck, ceil},
		{coll.Gather, gatherBinomial, tree},
		{coll.Scatter, scatterBinomial, tree},
	}
	for _, cs := range cases {
		for _, n := range []int{2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 33, 64, 65} {
			w := colltest.NewWorld(n, false)
			err := w.Run(func(c coll.Comm) error {
				a := argsFor(cs.op, c, n)
				return cs.fn(c, a)
			})
			if err != nil {
				t.Fatalf("%s at %d ranks: %v", cs.op, n, err)
			}
			if got, want := w.Rounds(), cs.rounds(n); got != want {
				t.Errorf("%s at %d ranks took %d rounds, want %d", cs.op, n, got, want)
			}
		}
	}
}

// argsFor makes one rank's arguments of 8-byte blocks for op.
func argsFor(op coll.Op, c coll.Comm, n int) *coll.Args {
	a := &coll.Args{Op: op, Reducer: sumReducer()}
	switch op {
	case coll.Bcast:
		a.Recv = make([]byte, 8)
	case coll.Allreduce:
		a.Send, a.Recv = make([]byte, 8), make([]byte, 8)
	case coll.Allgather, coll.Gather:
		a.Send, a.Recv = make([]byte, 8), make([]byte, 8*n)
	case coll.Alltoall:
		a.Send, a.Recv = make([]byte, 8*n), make([]byte, 8*n)
	case coll.Scatter:
		a.Send, a.Recv = make([]byte, 8*n), make([]byte, 8)
	}
	return a
}

func sumReducer() datatype.Reducer {
	r, err := datatype.ReducerFor[int64](datatype.Sum)
	if err != nil {
		panic(err)
	}
	return r
}

// The decision rules pick what their measurements say, and a forced
// algorithm wins over them unless it needs a commutative op it lacks.
func TestRules(t *testing.T) {
	m := &module{segment: 32 << 10, bcastLarge: 64 << 10, allreduceLarge: 16 << 10, allreduceRing: 128 << 10,
		allgatherLarge: 64 << 10, alltoallSmall: 256, linearRanks: 10, linearBytes: 1024}
	sum := sumReducer()
	cases := []struct {
		op    coll.Op
		n     int
		bytes int
		want  string
	}{
		{coll.Allreduce, 2, 8, "recursive_doubling"},
		{coll.Allreduce, 2, 1024, "ring"},
		{coll.Allreduce, 4, 64 << 10, "recursive_doubling"},
		{coll.Allreduce, 4, 256 << 10, "ring"},
		{coll.Allreduce, 16, 32 << 10, "rabenseifner"},
		{coll.Bcast, 4, 1 << 20, "binomial"},
		{coll.Bcast, 16, 1 << 20, "scatter_allgather"},
		{coll.Reduce, 4, 128 << 10, "rabenseifner"},
		{coll.Reduce, 4, 1 << 20, "binomial"},
		{coll.Alltoall, 4, 4 * 8, "bruck"},
		{coll.Alltoall, 4, 4 * 1024, "pairwise"},
		{coll.Allgather, 4, 4 * 8, "recursive_doubling"},
		{coll.Allgather, 5, 5 * 8, "bruck"},
		{coll.Allgather, 4, 256 << 10, "ring"},
		{coll.Gather, 2, 4096, "binomial"},
		{coll.Gather, 4, 8, "linear"},
		{coll.Gather, 16, 8, "binomial"},
		{coll.Gather, 16, 4096, "linear"},
		{coll.Scatter, 10, 8, "linear"},
		{coll.Scatter, 11, 8, "binomial"},
		{coll.Scatter, 16, 1024, "linear"},
	}
	for _, c := range cases {
		w := colltest.NewWorld(c.n, false)
		a := &coll.Args{Send: make([]byte, c.bytes), Recv: make([]byte, c.bytes), Reducer: sum}
		if c.op == coll.Bcast {
			a.Reducer = datatype.Reducer{}
		}
		if got := m.choose(c.op, w.Comm(0), a).name; got != c.want {
			t.Errorf("%s on %d ranks, %d bytes: %s, want %s", c.op, c.n, c.bytes, got, c.want)
		}
	}
	// A rooted call's root sees the block size from its n blocks when in
	// place: every rank must choose alike, or they wait on each other.
	for _, op := range []coll.Op{coll.Gather, coll.Scatter} {
		for _, c := range []struct{ n, block int }{{16, 8}, {16, 100}, {16, 4096}, {4, 8}} {
			w := colltest.NewWorld(c.n, false)
			other := m.choose(op, w.Comm(1), &coll.Args{Send: make([]byte, c.block), Recv: make([]byte, c.block), Root: 0}).name
			root := &coll.Args{Recv: make([]byte, c.n*c.block), InPlace: true, Root: 0}
			if op == coll.Scatter {
				root = &coll.Args{Send: make([]byte, c.n*c.block), InPlace: true, Root: 0}
			}
			if got := m.choose(op, w.Comm(0), root).name; got != other {
				t.Errorf("%s on %d ranks, %d-byte blocks: the root in place chose %s, the others %s", op, c.n, c.block, got, other)
			}
		}
	}
	// Two ranks on two nodes (coll han's leaders): recursive doubling up
	// to the ring's threshold, whose second round trip crosses the network.
	across := &module{segment: m.segment, allreduceLarge: m.allreduceLarge, allreduceRing: m.allreduceRing, spansNodes: true}
	for _, c := range []struct {
		bytes int
		want  string
	}{{1024, "recursive_doubling"}, {64 << 10, "recursive_doubling"}, {128 << 10, "ring"}} {
		a := &coll.Args{Send: make([]byte, c.bytes), Recv: make([]byte, c.bytes), Reducer: sum}
		if got := across.choose(coll.Allreduce, colltest.NewWorld(2, false).Comm(0), a).name; got != c.want {
			t.Errorf("allreduce on 2 ranks of 2 nodes, %d bytes: %s, want %s", c.bytes, got, c.want)
		}
	}
	// Scatter across nodes: a binomial tree below the threshold on any
	// number of ranks, linear from it as on one node.
	across.linearRanks, across.linearBytes, across.scatterAcross = m.linearRanks, m.linearBytes, 16<<10
	for _, c := range []struct {
		n, block int
		inPlace  bool
		want     string
	}{{4, 8, false, "binomial"}, {4, 4096, false, "binomial"}, {4, 4096, true, "binomial"}, {4, 16 << 10, false, "linear"}, {16, 4096, false, "binomial"}} {
		a := &coll.Args{Send: make([]byte, c.n*c.block), Recv: make([]byte, c.block)}
		if c.inPlace {
			a = &coll.Args{Send: make([]byte, c.n*c.block), InPlace: true}
		}
		if got := across.choose(coll.Scatter, colltest.NewWorld(c.n, false).Comm(0), a).name; got != c.want {
			t.Errorf("scatter on %d ranks of several nodes, %d-byte blocks (in place %v): %s, want %s", c.n, c.block, c.inPlace, got, c.want)
		}
	}
	if got := m.choose(coll.Scatter, colltest.NewWorld(4, false).Comm(0), &coll.Args{Send: make([]byte, 32), Recv: make([]byte, 8)}).name; got != "linear" {
		t.Errorf("scatter on 4 ranks of one node, 8-byte blocks: %s, want linear", got)
	}
	m.forced[coll.Allreduce] = 3 // ring
	w := colltest.NewWorld(4, false)
	if got := m.choose(coll.Allreduce, w.Comm(0), &coll.Args{Recv: make([]byte, 8), Reducer: sum}).name; got != "ring" {
		t.Errorf("forced ring: %s", got)
	}
	// A non-commutative op gets the first algorithm, which keeps rank
	// order, with one warning however many calls.
	var logs bytes.Buffer
	b, err := mca.NewBase(mca.Options{Output: &logs})
	if err != nil {
		t.Fatal(err)
	}
	m.log = b.Logger("coll")
	affine, err := datatype.ReducerFor[uint64](colltest.Affine)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if got := m.choose(coll.Allreduce, w.Comm(0), &coll.Args{Recv: make([]byte, 8), Reducer: affine}).name; got != "recursive_doubling" {
			t.Errorf("forced ring, non-commutative op: %s, want recursive_doubling", got)
		}
	}
	if k := strings.Count(logs.String(), "forced algorithm needs a commutative op"); k != 1 {
		t.Errorf("forced ring, non-commutative op, 3 calls: %d warnings, want 1:\n%s", k, logs.String())
	}
}

// Each value of a coll_tuned_<op>_algorithm parameter reaches the module
// Query makes: the module runs that algorithm (a commutative op, so none
// gives way), whatever the rules would pick. package mpi's
// TestForcedAlgorithms runs each forced algorithm on the real stack and
// relies on this.
func TestForcedParams(t *testing.T) {
	w := colltest.NewWorld(8, false)
	forced := 0
	for i, as := range algs {
		op := coll.Op(i)
		for v := 1; v < len(as); v++ {
			c := &Component{}
			cat := mca.NewCatalog()
			cat.RegisterFramework(coll.Framework)
			cat.Register(c, mca.Builtin)
			b, err := mca.NewBase(mca.Options{Catalog: cat, Output: io.Discard, Sources: params.Sources{
				Env:         []string{"OMPI_MCA_mca_base_param_files=none"},
				CommandLine: []params.Setting{{Name: AlgorithmParam(op), Value: as[v].name}}}})
			if err != nil {
				t.Fatal(err)
			}
			_, mod, err := c.Query(b, w.Comm(0))
			if err != nil {
				t.Fatal(err)
			}
			a := argsFor(op, w.Comm(0), 8)
			if got := mod.(*module).choose(op, w.Comm(0), a).name; got != as[v].name {
				t.Errorf("%s = %s: the module runs %s", AlgorithmParam(op), as[v].name, got)
			}
			forced++
		}
	}
	if forced == 0 {
		t.Fatal("no algorithm to force")
	}
}
