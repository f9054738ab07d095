package mpi_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// Recovery (ULFM): when a rank dies, the survivors' collectives fail with
// ErrProcFailed; Shrink gives them a communicator of the survivors, on
// which the program goes on. Under mpirun this takes --enable-recovery
// (docs/fault-tolerance.md); here mpitest's Rank.Die stands for a crash.
func ExampleComm_Shrink() {
	err := mpitest.RunErr(4, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if w.Rank() == 2 {
			r.Die() // as if killed: no goodbye
		}
		for {
			err := w.Barrier()
			if err == nil {
				continue // the death is not known yet
			}
			if !errors.Is(err, mpi.ErrProcFailed) {
				return err
			}
			break
		}
		s, err := w.Shrink()
		if err != nil {
			return err
		}
		defer s.Free()
		sum := make([]int, 1)
		if err := mpi.Allreduce(s, []int{w.Rank()}, sum, mpi.Sum); err != nil {
			return err
		}
		if s.Rank() == 0 {
			fmt.Printf("%d survivors, sum of their world ranks %d\n", s.Size(), sum[0])
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: 3 survivors, sum of their world ranks 4
}

// Agree gives every survivor the same answer to "did this phase succeed
// everywhere?": the AND of the flags of the ranks that took part, even when
// one died. Revoke wakes peers that wait in point-to-point on a rank
// that gave up, so that all reach the Agree.
func ExampleComm_Agree() {
	err := mpitest.RunErr(3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		ok := 1
		if w.Rank() == 1 { // this rank's part of the phase failed
			ok = 0
			if err := w.Revoke(); err != nil {
				return err
			}
		} else {
			// Waits for a message that will never come; Revoke ends it.
			_, err := w.Recv(nil, 1, 0)
			if !errors.Is(err, mpi.ErrRevoked) {
				return fmt.Errorf("Recv: %v, want ErrRevoked", err)
			}
		}
		all, err := w.Agree(ok)
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			fmt.Println("phase succeeded everywhere:", all == 1, "revoked:", w.IsRevoked())
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: phase succeeded everywhere: false revoked: true
}
