package mpi_test

import (
	"fmt"
	"testing"

	"github.com/gompi/gompi/mpitest"
)

// BenchmarkPingPong measures the one-way time of a small message between
// two goroutine ranks, blocking Send and Recv, per transport.
func BenchmarkPingPong(b *testing.B) {
	for _, btl := range []string{"self,shm", "self,tcp"} {
		for _, size := range []int{8, 4096, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%d", btl, size), func(b *testing.B) {
				mpitest.Run(b, 2, func(r *mpitest.Rank) error {
					c := r.CommWorld()
					buf := make([]byte, size)
					peer := 1 - c.Rank()
					var err error
					if c.Rank() == 0 {
						b.SetBytes(int64(size))
						b.ResetTimer()
					}
					for i := 0; i < b.N && err == nil; i++ {
						if c.Rank() == 0 {
							if err = c.Send(buf, peer, 1); err == nil {
								_, err = c.Recv(buf, peer, 1)
							}
						} else {
							if _, err = c.Recv(buf, peer, 1); err == nil {
								err = c.Send(buf, peer, 1)
							}
						}
					}
					if c.Rank() == 0 {
						b.StopTimer()
						b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/oneway")
					}
					return err
				}, mpitest.WithMCA("btl", btl))
			})
		}
	}
}
