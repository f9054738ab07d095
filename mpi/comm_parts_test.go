package mpi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// TestPartsFreed: the parts coll han makes (coll.Splitter) go with their
// communicator. A Dup that runs a collective through han (making its node
// and leaders' parts, two more context ids) and is freed, many times over:
// after each Free, three new communicators take the same three lowest ids
// as after the first, so the parts' ids were freed too.
func TestPartsFreed(t *testing.T) {
	cycles := 200
	if testing.Short() {
		cycles = 20
	}
	nodes := []int{0, 1, 0, 1, 1}
	mpitest.Run(t, len(nodes), func(r *mpitest.Rank) error {
		w := r.CommWorld()
		var first [3]int
		for i := 0; i < cycles; i++ {
			d, err := w.Dup()
			if err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
			if !strings.Contains(d.CollTable(), "allreduce=han>") {
				return fmt.Errorf("%s: no han in %s", d.Name(), d.CollTable())
			}
			var sum [1]int64
			if err := mpi.Allreduce(d, []int64{1}, sum[:], mpi.Sum); err != nil {
				return fmt.Errorf("cycle %d: %w", i, err)
			}
			if sum[0] != int64(len(nodes)) {
				return fmt.Errorf("cycle %d: sum %d, want %d", i, sum[0], len(nodes))
			}
			if err := d.Free(); err != nil {
				return err
			}
			var ids [3]int
			var dups [3]*mpi.Comm
			for k := range dups {
				if dups[k], err = w.Dup(); err != nil {
					return err
				}
				ids[k] = dups[k].ContextID()
			}
			if i == 0 {
				first = ids
			} else if ids != first {
				return fmt.Errorf("cycle %d: new communicators took context ids %v, after the first cycle %v: the parts' ids were not freed", i, ids, first)
			}
			for _, c := range dups {
				if err := c.Free(); err != nil {
					return err
				}
			}
		}
		return nil
	}, mpitest.WithNodes(nodes), mpitest.WithMCA("btl", "self,shm,tcp"))
}
