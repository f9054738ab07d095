package mpi_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// BenchmarkAllreduceGoroutineRanks times Allreduce of float64 sums over
// goroutine ranks of one process, where ranks far outnumber the cores:
// `go test -run - -bench AllreduceGoroutineRanks ./mpi`. The time per op is
// one call on every rank (b.N calls each, all ranks at once).
// GOMPI_BENCH_COLL=<selection> sets the coll parameter (^sm, say).
func BenchmarkAllreduceGoroutineRanks(b *testing.B) {
	var opts []mpitest.Option
	if sel := os.Getenv("GOMPI_BENCH_COLL"); sel != "" {
		opts = append(opts, mpitest.WithMCA("coll", sel))
	}
	for _, n := range []int{16, 64} {
		for _, size := range []int{8, 1 << 10, 64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("ranks=%d/bytes=%d", n, size), func(b *testing.B) {
				b.SetBytes(int64(size))
				mpitest.Run(b, n, func(r *mpitest.Rank) error {
					w := r.CommWorld()
					send, recv := make([]float64, size/8), make([]float64, size/8)
					if err := mpi.Allreduce(w, send, recv, mpi.Sum); err != nil { // set-up out of the timing
						return err
					}
					if err := w.Barrier(); err != nil {
						return err
					}
					if w.Rank() == 0 {
						b.ResetTimer()
					}
					for i := 0; i < b.N; i++ {
						if err := mpi.Allreduce(w, send, recv, mpi.Sum); err != nil {
							return err
						}
					}
					if err := w.Barrier(); err != nil {
						return err
					}
					if w.Rank() == 0 {
						b.StopTimer()
					}
					return nil
				}, opts...)
			})
		}
	}
}
