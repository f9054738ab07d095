package mpi_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// Waitany and Testany treat persistent requests as MPI's do: the one they
// return becomes inactive and stays in the slice for the next Startall,
// inactive ones are passed over (before the first Start too), and with
// only inactive ones left Waitany returns Undefined. A loop of Startall
// and Waitany over the same slice is the common use.
func TestWaitanyPersistent(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		n := int64(c.Size())
		in, sum := []int64{0}, []int64{0}
		bc := []int64{0}
		ar, err := mpi.AllreduceInit(c, in, sum, mpi.Sum)
		if err != nil {
			return err
		}
		bq, err := mpi.BcastInit(c, bc, 0)
		if err != nil {
			return err
		}
		reqs := []*mpi.Request{nil, ar, bq}
		for run := int64(1); run <= 4; run++ {
			if i, _, err := mpi.Waitany(reqs); i != mpi.Undefined || err != nil {
				return fmt.Errorf("run %d: Waitany before Startall returned %d, %v; want Undefined: every request is inactive", run, i, err)
			}
			in[0] = run * int64(c.Rank()+1)
			if c.Rank() == 0 {
				bc[0] = 100 + run
			}
			if err := mpi.Startall(reqs[1:]); err != nil {
				return fmt.Errorf("run %d: %w", run, err)
			}
			seen := map[int]bool{}
			for len(seen) < 2 {
				var i int
				if run%2 == 0 {
					var ok bool
					if i, _, ok, err = mpi.Testany(reqs); !ok {
						runtime.Gosched()
						continue
					}
				} else {
					i, _, err = mpi.Waitany(reqs)
				}
				if err != nil {
					return fmt.Errorf("run %d: %w", run, err)
				}
				if i < 1 || seen[i] {
					return fmt.Errorf("run %d: returned %d after %v: want each of 1 and 2 once", run, i, seen)
				}
				if reqs[i] == nil {
					return fmt.Errorf("run %d: entry %d set to nil: a persistent request stays for its next Start", run, i)
				}
				seen[i] = true
			}
			if i, _, ok, err := mpi.Testany(reqs); i != mpi.Undefined || !ok || err != nil {
				return fmt.Errorf("run %d: Testany after both returned %d, %v, %v; want Undefined, true", run, i, ok, err)
			}
			if want := run * n * (n + 1) / 2; sum[0] != want || bc[0] != 100+run {
				return fmt.Errorf("run %d: allreduce %d, bcast %d; want %d, %d", run, sum[0], bc[0], want, 100+run)
			}
		}
		for _, q := range reqs[1:] {
			if err := q.Free(); err != nil {
				return err
			}
		}
		return nil
	})
}
