package mpi_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// failedOrRevoked reports whether err is what a survivor gets from a
// collective on a communicator with a dead member.
func failedOrRevoked(err error) bool {
	return errors.Is(err, mpi.ErrProcFailed) || errors.Is(err, mpi.ErrRevoked)
}

// survive is the program of the issue: a loop of Allreduce on the world
// until one fails (the victim dies in iteration dieAt), then Shrink, check
// the size, and 100 Allreduce with the right sums on the survivors.
func survive(r *mpitest.Rank, victim, dieAt int) error {
	w := r.CommWorld()
	var sum [1]int64
	failedAt := -1
	for it := 0; it < 10000; it++ {
		if w.Rank() == victim && it == dieAt {
			r.Die()
		}
		err := mpi.Allreduce(w, []int64{int64(w.Rank())}, sum[:], mpi.Sum)
		if err != nil {
			if !failedOrRevoked(err) {
				return fmt.Errorf("iteration %d: %w, want ErrProcFailed", it, err)
			}
			failedAt = it
			break
		}
	}
	if failedAt < 0 {
		return fmt.Errorf("no Allreduce failed")
	}
	s, err := w.Shrink()
	if err != nil {
		return err
	}
	if s.Size() != w.Size()-1 {
		return fmt.Errorf("shrunk to %d ranks, want %d", s.Size(), w.Size()-1)
	}
	want := int64(0)
	for q := 0; q < w.Size(); q++ {
		if q != victim {
			want += int64(q)
		}
	}
	for it := 0; it < 100; it++ {
		if err := mpi.Allreduce(s, []int64{int64(w.Rank())}, sum[:], mpi.Sum); err != nil {
			return fmt.Errorf("after Shrink, iteration %d: %w", it, err)
		}
		if sum[0] != want {
			return fmt.Errorf("after Shrink, iteration %d: sum %d, want %d", it, sum[0], want)
		}
	}
	return s.Free()
}

// TestFailureReachesEveryCollective kills a rank in a loop of Allreduce
// under each collective component: every survivor gets ErrProcFailed, and
// Shrink gives them a working communicator.
func TestFailureReachesEveryCollective(t *testing.T) {
	for _, sel := range []struct{ name, coll string }{
		{"sm", ""},
		{"tuned", "^sm"},
		{"basic", "basic,self"},
	} {
		for _, victim := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/victim%d", sel.name, victim), func(t *testing.T) {
				var opts []mpitest.Option
				if sel.coll != "" {
					opts = append(opts, mpitest.WithMCA("coll", sel.coll))
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					mpitest.Run(t, 4, func(r *mpitest.Rank) error { return survive(r, victim, 5) }, opts...)
				}()
				select {
				case <-done:
				case <-time.After(60 * time.Second):
					t.Fatal("hung")
				}
			})
		}
	}
}
