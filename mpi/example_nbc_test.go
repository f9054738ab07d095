package mpi_test

import (
	"fmt"
	"log"

	"github.com/gompi/gompi/mpi"
)

// Iallreduce starts a sum over every rank and returns at once: the rank
// computes what does not need the sum meanwhile, and waits only when it
// does. Until Wait returns, the send and receive buffers belong to the
// collective: do not read or change them. The reduction advances in every
// call into the instance and, with mpi_async_progress (on unless the node
// runs more ranks than it has cores), while the program computes.
func ExampleIallreduce() {
	inst, err := mpi.Init() // started without a launcher: a singleton, rank 0 of 1
	if err != nil {
		log.Fatal(err)
	}
	defer inst.Finalize()
	c := inst.CommWorld()

	local := []float64{1.5, 2.5} // this rank's partial sums
	global := make([]float64, len(local))
	req, err := mpi.Iallreduce(c, local, global, mpi.Sum)
	if err != nil {
		log.Fatal(err)
	}

	// Work that touches neither buffer overlaps the reduction.
	basel := 0.0
	for i := 1; i <= 100000; i++ {
		basel += 1 / float64(i) / float64(i)
	}

	if _, err := req.Wait(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d rank(s): sum %v; meanwhile %.4f\n", c.Size(), global, basel)
	// Output: 1 rank(s): sum [1.5 2.5]; meanwhile 1.6449
}

// AllreduceInit plans a reduction once, on fixed buffers; each Start runs
// it again, and Wait leaves the request ready for the next Start. An
// iterative solver's loop pays the planning once.
func ExampleAllreduceInit() {
	inst, err := mpi.Init()
	if err != nil {
		log.Fatal(err)
	}
	defer inst.Finalize()
	c := inst.CommWorld()

	residual := make([]float64, 1)
	total := make([]float64, 1)
	req, err := mpi.AllreduceInit(c, residual, total, mpi.Sum)
	if err != nil {
		log.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		residual[0] = 1 / float64(step) // the step's new value, in the same buffer
		if err := req.Start(); err != nil {
			log.Fatal(err)
		}
		if _, err := req.Wait(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("step %d: %.3f\n", step, total[0])
	}
	if err := req.Free(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// step 1: 1.000
	// step 2: 0.500
	// step 3: 0.333
}
