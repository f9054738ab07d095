package mpi_test

import (
	"fmt"
	"testing"

	"github.com/gompi/gompi/mpitest"
)

// Large messages on shm: with pml_ob1_rdma_choice=measured the receiver
// takes some by single copy and asks for fragments for others (its trials
// of each way), and every message arrives whole either way; with always,
// it never asks for fragments.
func TestRDMAChoiceTakesBothWays(t *testing.T) {
	const n, count = 256 << 10, 40
	for _, choice := range []string{"measured", "always"} {
		t.Run(choice, func(t *testing.T) {
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				buf := make([]byte, n)
				before := r.PMLStats()
				for i := 0; i < count; i++ {
					if w.Rank() == 0 {
						for k := range buf {
							buf[k] = byte(k*13 + i)
						}
						if err := w.Send(buf, 1, i); err != nil {
							return err
						}
						continue
					}
					if _, err := w.Recv(buf, 0, i); err != nil {
						return err
					}
					for k := range buf {
						if buf[k] != byte(k*13+i) {
							return fmt.Errorf("message %d: byte %d is %d, want %d", i, k, buf[k], byte(k*13+i))
						}
					}
				}
				if w.Rank() != 0 {
					return nil
				}
				after := r.PMLStats()
				rget, frags := after.RGet-before.RGet, after.RGetFallbacks-before.RGetFallbacks
				switch {
				case rget != count:
					return fmt.Errorf("%d of %d messages offered by RDMA Get", rget, count)
				case choice == "always" && frags != 0:
					return fmt.Errorf("with always, the receiver asked for fragments %d times", frags)
				case choice == "measured" && (frags == 0 || frags == rget):
					return fmt.Errorf("measured: %d of %d taken by fragments, want some of each way", frags, rget)
				}
				return nil
			}, mpitest.WithMCA("btl", "self,shm"), mpitest.WithMCA("pml_ob1_rdma_choice", choice))
		})
	}
}
