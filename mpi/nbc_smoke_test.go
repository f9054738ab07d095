package mpi_test

import (
	"fmt"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

func TestNBCSmoke(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7} {
		mpitest.Run(t, n, func(r *mpitest.Rank) error {
			w := r.CommWorld()
			send := []int64{int64(w.Rank() + 1), 10}
			recv := make([]int64, 2)
			req, err := mpi.Iallreduce(w, send, recv, mpi.Sum)
			if err != nil {
				return err
			}
			breq, err := w.Ibarrier()
			if err != nil {
				return err
			}
			if _, err := req.Wait(); err != nil {
				return err
			}
			if _, err := breq.Wait(); err != nil {
				return err
			}
			if want := int64(n * (n + 1) / 2); recv[0] != want || recv[1] != int64(10*n) {
				return fmt.Errorf("got %v, want %d", recv, want)
			}
			p, err := mpi.AllreduceInit(w, send, recv, mpi.Sum)
			if err != nil {
				return err
			}
			for k := 0; k < 5; k++ {
				send[1] = int64(k)
				if err := p.Start(); err != nil {
					return err
				}
				if _, err := p.Wait(); err != nil {
					return err
				}
				if recv[1] != int64(k*n) {
					return fmt.Errorf("run %d: %v", k, recv)
				}
			}
			return p.Free()
		})
	}
}
