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
