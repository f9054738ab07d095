// Command recover survives a rank's death: the ranks loop over an
// Allreduce, one of them kills itself with SIGKILL half-way (a stand-in
// for a crash), and the survivors catch the error, shrink the world to
// themselves and finish the loop.
//
//	go run ./cmd/mpirun -np 4 --enable-recovery ./examples/recover
//	go run ./cmd/mpirun -np 4 --enable-recovery ./examples/recover -victim 0 -at 2
//
// Each survivor prints the error it caught, the new size and, at the end,
// the last sum (of rank+1 over the survivors); mpirun exits with the dead
// rank's status (137 for SIGKILL). Without --enable-recovery the death ends
// the job, as in any MPI job. See docs/fault-tolerance.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"

	"github.com/gompi/gompi/mpi"
)

func main() {
	victim := flag.Int("victim", -1, "world rank that kills itself (-1: the last)")
	at := flag.Int("at", 5, "iteration in which it does")
	iterations := flag.Int("iterations", 10, "iterations of the loop")
	flag.Parse()

	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "recover:", err)
		os.Exit(1)
	}
	world := inst.CommWorld()
	me := world.Rank()
	if *victim < 0 {
		*victim = world.Size() - 1
	}
	c := world
	sum := []int64{0}
	for it := 0; it < *iterations; it++ {
		// A singleton has nobody to go on without it.
		if me == *victim && it == *at && world.Size() > 1 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
		err := mpi.Allreduce(c, []int64{int64(me + 1)}, sum, mpi.Sum)
		if errors.Is(err, mpi.ErrProcFailed) || errors.Is(err, mpi.ErrRevoked) {
			fmt.Printf("rank %d: %v\n", me, err)
			if c, it, err = shrink(c, it); err != nil {
				fmt.Fprintln(os.Stderr, "recover:", err)
				inst.Abort(1)
			}
			fmt.Printf("rank %d: going on with %d ranks from iteration %d\n", me, c.Size(), it)
			it-- // the loop's it++ brings it back: redo the failed iteration
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "recover:", err)
			inst.Abort(1)
		}
	}
	fmt.Printf("rank %d: final sum %d over %d ranks\n", me, sum[0], c.Size())
	if err := inst.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "recover:", err)
		os.Exit(1)
	}
}

// shrink makes a communicator of c's survivors and agrees with them on the
// iteration to redo. A survivor learns of the death when the launcher's
// notice reaches it, so one may have finished iteration it-1 while another
// failed in it: every survivor must call the same number of collectives on
// the new communicator. Here each iteration stands alone, so redoing one is
// harmless; a program with state carried from one iteration to the next
// would roll back to the agreed one.
func shrink(c *mpi.Comm, it int) (*mpi.Comm, int, error) {
	s, err := c.Shrink()
	if err != nil {
		return nil, 0, err
	}
	from := []int64{int64(it)}
	if err := mpi.Allreduce(s, from, from, mpi.Min); err != nil {
		return nil, 0, err
	}
	return s, int(from[0]), nil
}
