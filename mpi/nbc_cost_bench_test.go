package mpi_test

import (
	"testing"

	"github.com/gompi/gompi/mpi"
)

// BenchmarkCostNBC is the software's own cost of a nonblocking Allreduce
// of 8 bytes on two ranks that one goroutine drives (no waiting for a
// peer): Iallreduce, or Start of an AllreduceInit, then Test until both
// are done; through sm's own nonblocking path, and through tuned's
// algorithm as a coroutine (coll ^sm); each then Wait, which gives a
// nonblocking request back for reuse. ns/op covers both ranks.
func BenchmarkCostNBC(b *testing.B) {
	for _, coll := range []struct{ name, sel string }{{"sm", ""}, {"coroutine", "^sm"}} {
		for _, kind := range []string{"iallreduce", "persistent"} {
			b.Run(coll.name+"/"+kind, func(b *testing.B) {
				softwareCost(b, func(b *testing.B, c0, c1 *mpi.Comm) error {
					// A blocking collective sets sm's segment up.
					errc := make(chan error, 1)
					go func() { errc <- c1.Barrier() }()
					if err := c0.Barrier(); err != nil {
						return err
					}
					if err := <-errc; err != nil {
						return err
					}
					s0, r0 := []float64{1}, []float64{0}
					s1, r1 := []float64{2}, []float64{0}
					var p0, p1 *mpi.Request
					if kind == "persistent" {
						var err error
						if p0, err = mpi.AllreduceInit(c0, s0, r0, mpi.Sum); err != nil {
							return err
						}
						if p1, err = mpi.AllreduceInit(c1, s1, r1, mpi.Sum); err != nil {
							return err
						}
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						q0, q1 := p0, p1
						if kind == "persistent" {
							if err := mpi.Startall([]*mpi.Request{p0, p1}); err != nil {
								return err
							}
						} else {
							var err error
							if q0, err = mpi.Iallreduce(c0, s0, r0, mpi.Sum); err != nil {
								return err
							}
							if q1, err = mpi.Iallreduce(c1, s1, r1, mpi.Sum); err != nil {
								return err
							}
						}
						// Test until both are done, then Wait, which gives a
						// nonblocking request back for reuse.
						for done0, done1 := false, false; !done0 || !done1; {
							var err error
							if !done0 {
								if _, done0, err = q0.Test(); err != nil {
									return err
								}
							}
							if !done1 {
								if _, done1, err = q1.Test(); err != nil {
									return err
								}
							}
						}
						if _, err := q0.Wait(); err != nil {
							return err
						}
						if _, err := q1.Wait(); err != nil {
							return err
						}
					}
					b.StopTimer()
					if r0[0] != 3 || r1[0] != 3 {
						b.Errorf("sums %v and %v, want 3", r0, r1)
					}
					if kind == "persistent" {
						if err := p0.Free(); err != nil {
							return err
						}
						return p1.Free()
					}
					return nil
				}, "btl", "self,shm", "coll", coll.sel, "mpi_async_progress", "no")
			})
		}
	}
}
