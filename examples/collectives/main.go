// Command collectives runs a barrier and an allreduce and prints, per rank,
// the sum of all ranks and which component fills each collective on the
// world communicator:
//
//	go run ./cmd/mpirun -np 4 ./examples/collectives
//
// With a plugin on the component path its slot shows up in the table:
//
//	go run ./cmd/mpirun -np 4 --mca mca_base_component_path DIR ./examples/collectives
package main

import (
	"fmt"
	"os"

	"github.com/gompi/gompi/mpi"
)

func main() {
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "collectives:", err)
		os.Exit(1)
	}
	w := inst.CommWorld()
	err = w.Barrier()
	var sum [1]int64
	if err == nil {
		err = mpi.Allreduce(w, []int64{int64(w.Rank())}, sum[:], mpi.Sum)
	}
	if err == nil {
		err = w.Barrier()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "collectives:", err)
		inst.Abort(1)
	}
	fmt.Printf("rank %d: sum %d; %s\n", w.Rank(), sum[0], w.CollTable())
	if err := inst.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "collectives:", err)
		os.Exit(1)
	}
}
