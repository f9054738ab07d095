// Command abort is run by test/slurm/run.sh: rank 1 calls Abort while the
// others wait in a barrier that it never joins, so that the job ends only if
// the launcher heard the abort (under srun --mpi=pmi2, PMI-2's abort
// command, which has no answer).
package main

import (
	"fmt"
	"os"

	"github.com/gompi/gompi/mpi"
)

func main() {
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "abort:", err)
		os.Exit(1)
	}
	w := inst.CommWorld()
	if w.Rank() == 1 {
		fmt.Println("rank 1 calls Abort(3)")
		inst.Abort(3)
	}
	if err := mpi.Barrier(w); err != nil {
		fmt.Fprintln(os.Stderr, "abort:", err)
	}
	fmt.Printf("rank %d passed a barrier that rank 1 never entered\n", w.Rank())
	inst.Finalize()
}
