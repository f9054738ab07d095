// Command linked is a gompi program with a coll component of its own,
// linked in from this module: ringbarrier takes the barrier, tuned the
// rest.
//
//	go build -o linked . && mpirun -np 4 --mca coll_base_verbose 10 ./linked
package main

import (
	"fmt"
	"os"

	"github.com/gompi/gompi/mpi"

	_ "example.com/gompi-ringbarrier/ringbarrier" // registers the component
)

func main() {
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "linked:", err)
		os.Exit(1)
	}
	w := inst.CommWorld()
	err = w.Barrier()
	var sum [1]int64
	if err == nil {
		err = mpi.Allreduce(w, []int64{int64(w.Rank())}, sum[:], mpi.Sum)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "linked:", err)
		inst.Abort(1)
	}
	fmt.Printf("rank %d: sum %d; %s\n", w.Rank(), sum[0], w.CollTable())
	if err := inst.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "linked:", err)
		os.Exit(1)
	}
}
