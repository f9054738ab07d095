package mpi_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/gompi/gompi/internal/collcheck"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
)

// collSizes are the communicator sizes of the collective tests.
func collSizes() []int {
	if testing.Short() {
		return []int{1, 2, 3, 4, 5, 7, 8, 9, 16}
	}
	s := []int{65}
	for n := 1; n <= 17; n++ {
		s = append(s, n)
	}
	return s
}

// allRootsUpTo is the largest size at which the suite runs rooted
// collectives from every root.
const allRootsUpTo = 17

// subComms returns the sub-communicators the suite also runs on: every
// other rank, and a random half (the same on every rank: a fixed seed).
func subComms(w *mpi.Comm) ([]*mpi.Comm, error) {
	n := w.Size()
	var even []int
	for r := 0; r < n; r += 2 {
		even = append(even, r)
	}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	random := rng.Perm(n)[:max(1, n/2)]
	var out []*mpi.Comm
	for _, members := range [][]int{even, random} {
		g, err := w.Group().Incl(members)
		if err != nil {
			return nil, err
		}
		sub, err := w.Create(g)
		if err != nil {
			return nil, err
		}
		if sub != nil {
			out = append(out, sub)
		}
	}
	return out, nil
}

// runCollSuite runs the collectives suite on the world and on
// sub-communicators, at the given sizes, with the given parameters; with from
// set, every slot of each of them must come from that module.
func runCollSuite(t *testing.T, sizes []int, o collcheck.Options, from string, mca ...string) {
	for _, n := range sizes {
		o := o
		if n > allRootsUpTo {
			// Every root's tree relative to the others is checked at the
			// sizes below; at 65 ranks, all 65 roots cost most of the
			// suite's time for no shape the three roots do not reach.
			o.AllRoots = false
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var opts []mpitest.Option
			for i := 0; i+1 < len(mca); i += 2 {
				opts = append(opts, mpitest.WithMCA(mca[i], mca[i+1]))
			}
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				run := func(c *mpi.Comm) error {
					if from != "" {
						for _, f := range strings.Fields(c.CollTable()) {
							if _, m, _ := strings.Cut(f, "="); m != from {
								return fmt.Errorf("%s: slot %s, want every slot from %s", c.Name(), f, from)
							}
						}
					}
					return collcheck.Run(c, o)
				}
				if err := run(w); err != nil {
					return err
				}
				subs, err := subComms(w)
				if err != nil {
					return err
				}
				for _, s := range subs {
					if err := run(s); err != nil {
						return err
					}
					if err := s.Free(); err != nil {
						return err
					}
				}
				return nil
			}, opts...)
		})
	}
}

// Every collective, as selected by default, at sizes 1-17 and 65, on the
// world and on sub-communicators from Comm.Create, matches the reference.
func TestCollectives(t *testing.T) {
	o := collcheck.Options{AllRoots: !testing.Short()}
	if testing.Short() {
		o.Counts = []int{0, 1, 7}
	}
	runCollSuite(t, collSizes(), o, "")
}

// basic alone fills every slot.
func TestCollectivesBasicOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the default selection covers the suite")
	}
	// Up to 17 ranks: basic's linear algorithms at 65 cost most of the
	// time, and components/coll/basic's conformance runs them at 65.
	var sizes []int
	for _, n := range collSizes() {
		if n <= allRootsUpTo {
			sizes = append(sizes, n)
		}
	}
	runCollSuite(t, sizes, collcheck.Options{Counts: []int{0, 3, 100}}, "basic", "coll", "basic")
}

// coll=self on four ranks leaves every slot empty: Init fails, naming the
// operations and why self declined.
func TestCollSelectionErrors(t *testing.T) {
	// Every rank fails for the same reason, and none before the others
	// have wired their transports: no rank reports a peer's removed
	// segment instead (RunErr returns one rank's error).
	err := mpitest.RunErr(4, func(r *mpitest.Rank) error { return nil }, mpitest.WithMCA("coll", "self"))
	if !errors.Is(err, mpierr.ErrComponentNotFound) {
		t.Fatalf("coll=self on 4 ranks: %v, want ErrComponentNotFound", err)
	}
	for _, want := range []string{"no module fills barrier, bcast, reduce", "reduce_scatter_block", "self (communicator MPI_COMM_WORLD has 4 ranks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// slotFrom reads which module fills op's slot from c's table.
func slotFrom(c *mpi.Comm, op string) string {
	for _, f := range strings.Fields(c.CollTable()) {
		if k, v, _ := strings.Cut(f, "="); k == op {
			return v
		}
	}
	return ""
}

// checkOf maps a coll_tuned_<op>_algorithm parameter to the suite's check
// of that operation.
func checkOf(op string) string {
	switch op {
	case "allgatherv":
		return "allgather"
	case "alltoallv":
		return "alltoall"
	case "gatherv":
		return "gather"
	case "scatterv":
		return "scatter"
	case "exscan":
		return "scan"
	case "reduce_scatter", "reduce_scatter_block":
		return "reducescatter"
	}
	return op
}

// Every algorithm that a coll_tuned_<op>_algorithm parameter can force
// passes its operation's checks on the real stack, at sizes around powers
// of two, with every root and with segments small enough to pipeline. The
// algorithms come from the registry, so a new one is tested as soon as its
// enum value exists. Nothing here can tell which algorithm ran: tuned's
// TestForcedParams checks that the parameter picks it.
func TestForcedAlgorithms(t *testing.T) {
	var forced int
	// One rank is self's; powers of two and sizes between them. Every
	// algorithm runs at every size 1-17 and 65 in tuned's own conformance:
	// here the parameter's way to it through real transports is checked.
	sizes := []int{2, 3, 5, 8, 13}
	if testing.Short() {
		sizes = []int{3, 4, 7}
	}
	for _, p := range mca.Default().Params().Params() {
		name := p.Name()
		op, ok := strings.CutSuffix(strings.TrimPrefix(name, "coll_tuned_"), "_algorithm")
		if !ok || !strings.HasPrefix(name, "coll_tuned_") {
			continue
		}
		for _, v := range p.Def().Values {
			if v.Name == "auto" {
				continue
			}
			forced++
			t.Run(op+"/"+v.Name, func(t *testing.T) {
				for k, n := range sizes {
					// At one size the algorithm also runs nonblocking
					// (nbc runs the slot's algorithm as a coroutine):
					// every shape of the blocking form is one there too.
					mode := collcheck.Blocking
					if k == len(sizes)/2 {
						mode = collcheck.Nonblocking
					}
					mpitest.Run(t, n, func(r *mpitest.Rank) error {
						o := collcheck.Options{Only: []string{checkOf(op)}, AllRoots: true, Counts: []int{0, 1, 5, 300}, Mode: mode}
						w := r.CommWorld()
						if from := slotFrom(w, op); from != "tuned" {
							return fmt.Errorf("%s comes from %s, not tuned", op, from)
						}
						return collcheck.Run(w, o)
					}, mpitest.WithMCA(name, v.Name), mpitest.WithMCA("coll_tuned_bcast_segment_size", "1024"),
						mpitest.WithMCA("coll", "^tofu,sm")) // tofu and sm would take the barrier, sm the small bcast, reduce, allreduce, allgather, alltoall, gather and scatter
				}
			})
		}
	}
	if forced == 0 {
		t.Fatal("no coll_tuned_<op>_algorithm parameter has a value to force: is tuned registered?")
	}
}

// A forced algorithm that needs a commutative op, given a non-commutative
// one, is replaced by one that keeps rank order (the result is right), with
// one warning; a bad algorithm name is an error naming the accepted ones.
func TestForcedAlgorithmFallback(t *testing.T) {
	var mu sync.Mutex
	var warnings int
	affine := mpi.NewOp("affine", func(in, inout []uint64) {
		for i := range inout {
			m1, c1 := in[i]>>32, in[i]&0xffffffff
			m2, c2 := inout[i]>>32, inout[i]&0xffffffff
			inout[i] = (m1*m2&0xffffffff)<<32 | (m2*c1+c2)&0xffffffff
		}
	}, false)
	mpitest.Run(t, 5, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me := uint64(w.Rank())
		x := []uint64{(me+2)<<32 | (me + 1)}
		var got [1]uint64
		for i := 0; i < 3; i++ {
			if err := mpi.Allreduce(w, x, got[:], affine); err != nil {
				return err
			}
		}
		want := uint64(1)<<32 | 0 // the identity map, then compose rank by rank
		for q := uint64(0); q < 5; q++ {
			m1, c1 := want>>32, want&0xffffffff
			m2, c2 := q+2, q+1
			want = (m1*m2&0xffffffff)<<32 | (m2*c1+c2)&0xffffffff
		}
		if got[0] != want {
			return fmt.Errorf("allreduce of a non-commutative op under a forced ring: %x, want %x", got[0], want)
		}
		return nil
	}, mpitest.WithMCA("coll_tuned_allreduce_algorithm", "ring"), mpitest.WithMCA("coll", "^sm"), // sm would take the small allreduce
		mpitest.WithLogf(func(format string, a ...any) {
			if line := fmt.Sprintf(format, a...); strings.Contains(line, "needs a commutative op") {
				mu.Lock()
				warnings++
				mu.Unlock()
			}
		}))
	if warnings != 5 { // once per rank's communicator
		t.Errorf("%d warnings, want one per rank (5)", warnings)
	}
	err := mpitest.RunErr(2, func(r *mpitest.Rank) error { return nil }, mpitest.WithMCA("coll_tuned_allreduce_algorithm", "fastest"))
	if err == nil || !strings.Contains(err.Error(), "recursive_doubling") || !strings.Contains(err.Error(), "ring") {
		t.Errorf("a bad algorithm name: %v", err)
	}
}
