package mpitest_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// RunErr runs a job of goroutine ranks in one process, over the real
// components and an in-process PMI server: a test of MPI code needs no
// mpirun. Each rank gets its own mpi.Instance; RunErr finalizes the ones
// the function leaves open and returns the first rank's error. Write the
// results where the caller reads them after RunErr returns, or print from
// one rank, to keep the output in order. In a test, Run(t, ...) fails t
// instead.
func ExampleRunErr() {
	const n = 4
	sums := make([]int, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		s := make([]int, 1)
		if err := mpi.Allreduce(w, []int{w.Rank() + 1}, s, mpi.Sum); err != nil {
			return err
		}
		sums[w.Rank()] = s[0]
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sums)
	// Output: [10 10 10 10]
}

// WithMCA sets an MCA parameter for every rank, as mpirun --mca does:
// here the coll selection, to run a test against the basic component's
// algorithms instead of the ones chosen by default.
func ExampleWithMCA() {
	err := mpitest.RunErr(2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if w.Rank() == 0 {
			for _, slot := range strings.Fields(w.CollTable()) {
				if strings.HasPrefix(slot, "allreduce=") {
					fmt.Println(slot)
				}
			}
		}
		return nil
	}, mpitest.WithMCA("coll", "basic,self"))
	if err != nil {
		log.Fatal(err)
	}
	// Output: allreduce=basic
}

// WithNodes places goroutine ranks on pretend nodes: ranks on different
// nodes talk over tcp as on separate hosts, so node-aware code
// (SplitType, hierarchical collectives) is tested in one process.
func ExampleWithNodes() {
	nodes := []int{0, 0, 1}
	names := make([]string, len(nodes))
	err := mpitest.RunErr(len(nodes), func(r *mpitest.Rank) error {
		names[r.Rank()] = fmt.Sprintf("rank %d: local rank %d of %d", r.Rank(), r.LocalRank(), r.LocalSize())
		return nil
	}, mpitest.WithNodes(nodes), mpitest.WithMCA("btl", "self,shm,tcp"))
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range names {
		fmt.Println(s)
	}
	// Output:
	// rank 0: local rank 0 of 2
	// rank 1: local rank 1 of 2
	// rank 2: local rank 0 of 1
}
