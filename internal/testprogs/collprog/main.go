// Command collprog runs the collectives suite (internal/collcheck) between
// real processes, for the tests of the coll framework under mpirun:
//
//	collprog            the suite on the world and on the communicator of its even ranks
//	collprog nonblocking the same with the nonblocking forms (Iallreduce ...), several
//	                    in flight, completed in each rank's own order
//	collprog persistent the same with the persistent forms (AllreduceInit ...)
//	collprog recover D  rank D kills itself (SIGKILL) after a barrier; the others
//	                    receive from it (and must get MPI_ERR_PROC_FAILED), make a
//	                    communicator of the survivors with CreateGroup, and Allreduce
//	                    on it (run under mpirun --enable-recovery)
//
// The suite prints, per rank, "coll ok rank R mode=M table=<the world's slot
// table>"; recover prints "recovered rank R of S: sum S' error <class>".
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/gompi/gompi/internal/collcheck"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
)

func main() {
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintf(os.Stderr, "collprog: %v\n", err)
		os.Exit(1)
	}
	run := func(w *mpi.Comm) error { return suite(w, collcheck.Blocking) }
	if len(os.Args) == 2 {
		modes := map[string]collcheck.Mode{"nonblocking": collcheck.Nonblocking, "persistent": collcheck.Persistent}
		m, ok := modes[os.Args[1]]
		if !ok {
			fmt.Fprintf(os.Stderr, "collprog: %q: accepted: nonblocking, persistent, recover D, or nothing\n", os.Args[1])
			os.Exit(2)
		}
		run = func(w *mpi.Comm) error { return suite(w, m) }
	}
	if len(os.Args) == 3 && os.Args[1] == "recover" {
		dead, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fmt.Fprintf(os.Stderr, "collprog: recover %q: want a rank\n", os.Args[2])
			os.Exit(2)
		}
		run = func(w *mpi.Comm) error { return recoverFrom(w, dead) }
	}
	if err := run(inst.CommWorld()); err != nil {
		fmt.Fprintf(os.Stderr, "collprog: rank %d: %v\n", inst.Rank(), err)
		inst.Abort(1)
	}
	if err := inst.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "collprog: %v\n", err)
		os.Exit(1)
	}
}

// recoverFrom is the recovery use of MPI_Comm_create_group (Dinan et al.):
// a rank dies, the others notice through an operation with it, and go on
// among themselves with a communicator only they create.
func recoverFrom(w *mpi.Comm, dead int) error {
	if err := w.Barrier(); err != nil {
		return err
	}
	// Every other rank tells the one that will die that it has left the
	// barrier, so that the death fails what comes next, not the barrier.
	if w.Rank() == dead {
		var token [1]byte
		for r := 0; r < w.Size()-1; r++ {
			if _, err := w.Recv(token[:], mpi.AnySource, 4); err != nil {
				return err
			}
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	if err := w.Send([]byte{1}, dead, 4); err != nil {
		return err
	}
	var b [8]byte
	_, recvErr := w.Recv(b[:], dead, 5)
	if !errors.Is(recvErr, mpi.ErrProcFailed) {
		return fmt.Errorf("a receive from dead rank %d returned %v, want MPI_ERR_PROC_FAILED", dead, recvErr)
	}
	survivors, err := w.Group().Excl([]int{dead})
	if err != nil {
		return err
	}
	c, err := w.CreateGroup(survivors, 9)
	if err != nil {
		return err
	}
	var sum [1]int64
	if err := mpi.Allreduce(c, []int64{int64(w.Rank())}, sum[:], mpi.Sum); err != nil {
		return err
	}
	fmt.Printf("recovered rank %d of %d: sum %d error %s\n", c.Rank(), c.Size(), sum[0], mpierr.ClassOf(recvErr).Name())
	return c.Free()
}

func suite(w *mpi.Comm, m collcheck.Mode) error {
	o := collcheck.Options{Mode: m}
	if err := collcheck.Run(w, o); err != nil {
		return err
	}
	var even []int
	for r := 0; r < w.Size(); r += 2 {
		even = append(even, r)
	}
	g, err := w.Group().Incl(even)
	if err != nil {
		return err
	}
	sub, err := w.Create(g)
	if err != nil {
		return err
	}
	if sub != nil {
		if err := collcheck.Run(sub, o); err != nil {
			return err
		}
		if err := sub.Free(); err != nil {
			return err
		}
	}
	fmt.Printf("coll ok rank %d mode=%s table=%s\n", w.Rank(), m, w.CollTable())
	return nil
}
