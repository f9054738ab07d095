package mpi_test

import (
	"testing"

	"github.com/gompi/gompi/mpi"
)

// BenchmarkCostRooted is the software's own cost of a rooted collective of
// 8 bytes on two ranks that one goroutine drives (the root's call, then the
// other rank's, which finds the message there): no waiting for a peer, no
// cache line crossing cores. ns/op covers both ranks.
func BenchmarkCostRooted(b *testing.B) {
	ops := []struct {
		name string
		call func(c *mpi.Comm, send, recv []float64) error
	}{
		{"bcast", func(c *mpi.Comm, send, _ []float64) error { return mpi.Bcast(c, send, 0) }},
		{"reduce", func(c *mpi.Comm, send, recv []float64) error { return mpi.Reduce(c, send, recv[:1], mpi.Sum, 0) }},
		{"gather", func(c *mpi.Comm, send, recv []float64) error { return mpi.Gather(c, send, recv, 0) }},
		{"scatter", func(c *mpi.Comm, send, recv []float64) error { return mpi.Scatter(c, recv, send, 0) }},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			softwareCost(b, func(b *testing.B, c0, c1 *mpi.Comm) error {
				s0, r0 := []float64{1}, []float64{0, 0}
				s1, r1 := []float64{2}, []float64{0, 0}
				// The non-root goes first for the operations whose message
				// flows to the root.
				first, second := c0, c1
				fs, fr, ss, sr := s0, r0, s1, r1
				if op.name == "reduce" || op.name == "gather" {
					first, second, fs, fr, ss, sr = c1, c0, s1, r1, s0, r0
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := op.call(first, fs, fr); err != nil {
						return err
					}
					if err := op.call(second, ss, sr); err != nil {
						return err
					}
				}
				return nil
			}, "btl", "self,shm")
		})
	}
}
