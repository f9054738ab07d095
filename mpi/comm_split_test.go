package mpi_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
)

func splitSizes() []int {
	if testing.Short() {
		return []int{1, 2, 3, 5, 8, 13}
	}
	s := []int{129}
	for n := 1; n <= 17; n++ {
		s = append(s, n)
	}
	return s
}

// Split by random colors (some Undefined) and keys: every rank's new
// communicator holds exactly the ranks of its color, ordered by key then
// parent rank; its messages never match the parent's, nor a Dup's.
func TestSplitAndDup(t *testing.T) {
	for _, n := range splitSizes() {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(n), 11))
			colors, keys := make([]int, n), make([]int, n)
			for r := range colors {
				colors[r] = rng.IntN(3)
				if rng.IntN(5) == 0 {
					colors[r] = mpi.Undefined
				}
				keys[r] = rng.IntN(4) - 2
			}
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				me := w.Rank()
				sub, err := w.Split(colors[me], keys[me])
				if err != nil {
					return err
				}
				var want []int
				for q := 0; q < n; q++ {
					if colors[me] != mpi.Undefined && colors[q] == colors[me] {
						want = append(want, q)
					}
				}
				slices.SortStableFunc(want, func(a, b int) int { return keys[a] - keys[b] })
				if colors[me] == mpi.Undefined {
					if sub != nil {
						return errors.New("Undefined color got a communicator")
					}
					return isolation(w, nil)
				}
				if sub == nil {
					return fmt.Errorf("color %d: no communicator, want members %v", colors[me], want)
				}
				if sub.Size() != len(want) || want[sub.Rank()] != me {
					return fmt.Errorf("color %d: got size %d rank %d, want members %v", colors[me], sub.Size(), sub.Rank(), want)
				}
				got := make([]int64, sub.Size())
				if err := mpi.Allgather(sub, []int64{int64(me)}, got); err != nil {
					return err
				}
				for i, q := range want {
					if got[i] != int64(q) {
						return fmt.Errorf("color %d: members in order %v, want %v", colors[me], got, want)
					}
				}
				if err := isolation(w, sub); err != nil {
					return err
				}
				return sub.Free()
			})
		})
	}
}

// isolation sends a message with tag 5 to the next rank on the parent, on
// a Dup of the parent and on sub (when not nil), all before any receive;
// each receive, posted in the opposite order, must get its own
// communicator's message.
func isolation(w, sub *mpi.Comm) error {
	dup, err := w.Dup()
	if err != nil {
		return err
	}
	defer dup.Free()
	comms := []*mpi.Comm{w, dup}
	if sub != nil {
		comms = append(comms, sub)
	}
	for i, c := range comms {
		next := (c.Rank() + 1) % c.Size()
		if _, err := mpi.Isend(c, []int32{int32(1000*i + w.Rank())}, next, 5); err != nil {
			return err
		}
	}
	for i := len(comms) - 1; i >= 0; i-- {
		c := comms[i]
		prev := (c.Rank() + c.Size() - 1) % c.Size()
		var b [1]int32
		if _, err := mpi.Recv(c, b[:], prev, 5); err != nil {
			return err
		}
		if b[0]/1000 != int32(i) {
			return fmt.Errorf("%s received communicator %d's message (from world rank %d; comms %v)", c.Name(), b[0]/1000, b[0]%1000, names(comms))
		}
	}
	return w.Barrier()
}

// Context ids are reused after Free: every cycle of Dup, Split and Free
// takes the ids the first took (a cycle that leaked one would move on to
// others; running out takes 65534).
func TestCreateFreeCycles(t *testing.T) {
	cycles := 1000
	if testing.Short() {
		cycles = 100
	}
	mpitest.Run(t, 4, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		var first [2]int
		for i := 0; i < cycles; i++ {
			d, err := w.Dup()
			if err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
			s, err := d.Split(w.Rank()%2, 0)
			if err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
			ids := [2]int{d.ContextID(), s.ContextID()}
			if i == 0 {
				first = ids
			} else if ids != first {
				return fmt.Errorf("cycle %d took context ids %v, the first %v: ids freed were not reused", i, ids, first)
			}
			if err := errors.Join(s.Free(), d.Free()); err != nil {
				return err
			}
		}
		return nil
	})
}

// SplitType(SplitShared) gives the ranks of one node: every goroutine rank
// is on this one.
func TestSplitTypeAndErrors(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		node, err := w.SplitType(mpi.SplitShared, -w.Rank())
		if err != nil {
			return err
		}
		if node.Size() != 3 || node.Rank() != 2-w.Rank() {
			return fmt.Errorf("shared: size %d rank %d, want 3 and %d", node.Size(), node.Rank(), 2-w.Rank())
		}
		if err := node.Free(); err != nil {
			return err
		}
		if _, err := w.Split(-5, 0); !errors.Is(err, mpierr.ErrArg) {
			return fmt.Errorf("color -5: %v, want ErrArg", err)
		}
		if _, err := w.SplitType(7, 0); !errors.Is(err, mpierr.ErrArg) {
			return fmt.Errorf("split type 7: %v, want ErrArg", err)
		}
		none, err := w.SplitType(mpi.Undefined, 0)
		if err != nil || none != nil {
			return fmt.Errorf("split type Undefined: %v %v, want nil, nil", none, err)
		}
		return nil
	})
}

func names(cs []*mpi.Comm) []string {
	var s []string
	for _, c := range cs {
		s = append(s, fmt.Sprintf("%s:%d/%d", c.Name(), c.Rank(), c.Size()))
	}
	return s
}
