package han_test

import (
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// BenchmarkAllreduce: 4 goroutine ranks on 2 fake nodes, 64 KiB, by
// segment size (0: one piece), han against the components below it.
func BenchmarkAllreduce(b *testing.B) {
	for _, c := range []struct{ name, coll, seg string }{
		{"han-seg0", "", "0"}, {"han-seg16k", "", "16k"}, {"flat", "^han", "0"},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := opts([]int{0, 0, 1, 1}, mpitest.WithMCA("coll_han_segment_bytes", c.seg))
			if c.coll != "" {
				o = append(o, mpitest.WithMCA("coll", c.coll))
			}
			mpitest.Run(b, 4, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				buf := make([]float64, 8192)
				out := make([]float64, 8192)
				if err := w.Barrier(); err != nil {
					return err
				}
				if w.Rank() == 0 {
					b.ResetTimer()
				}
				for i := 0; i < b.N; i++ {
					if err := mpi.Allreduce(w, buf, out, mpi.Sum); err != nil {
						return err
					}
				}
				return nil
			}, o...)
		})
	}
}

// BenchmarkRooted8: 8-byte reduce and bcast to rank 0 in a loop, the
// root running ahead as far as the algorithm lets it; han against the
// components below it.
func BenchmarkRooted8(b *testing.B) {
	for _, op := range []string{"reduce", "bcast"} {
		for _, c := range []struct{ name, coll string }{{"han", ""}, {"flat", "^han"}} {
			b.Run(op+"-"+c.name, func(b *testing.B) {
				o := opts([]int{0, 0, 1, 1})
				if c.coll != "" {
					o = append(o, mpitest.WithMCA("coll", c.coll))
				}
				mpitest.Run(b, 4, func(r *mpitest.Rank) error {
					w := r.CommWorld()
					in, out := []float64{1}, []float64{0}
					if err := w.Barrier(); err != nil {
						return err
					}
					if w.Rank() == 0 {
						b.ResetTimer()
					}
					for i := 0; i < b.N; i++ {
						var err error
						if op == "reduce" {
							err = mpi.Reduce(w, in, out, mpi.Sum, 0)
						} else {
							err = mpi.Bcast(w, in, 0)
						}
						if err != nil {
							return err
						}
					}
					return w.Barrier()
				}, o...)
			})
		}
	}
}
