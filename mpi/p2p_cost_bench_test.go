package mpi_test

import (
	"testing"
	"time"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// softwareCost runs body on one goroutine with both ranks' communicators of
// a 2-rank job: body drives both sides itself (send on one, receive on the
// other), so that no wait ever spins and the time measured is the
// software's own cost per message, whatever the placement of the cores and
// the machine's load from other processes' spinning. Rank 1's goroutine
// parks meanwhile. body runs on rank 0's goroutine, so it returns its
// error rather than failing the benchmark itself.
func softwareCost(b *testing.B, body func(b *testing.B, c0, c1 *mpi.Comm) error, mca ...string) {
	var opts []mpitest.Option
	for i := 0; i+1 < len(mca); i += 2 {
		opts = append(opts, mpitest.WithMCA(mca[i], mca[i+1]))
	}
	comms := make(chan *mpi.Comm, 1)
	done := make(chan struct{})
	mpitest.Run(b, 2, func(r *mpitest.Rank) error {
		// Both ranks at once first: coll sm sets its segment up in the
		// communicator's first collective it serves, a rendezvous that one
		// goroutine driving both sides would never complete.
		if err := mpi.Allreduce(r.CommWorld(), []float64{1}, make([]float64, 1), mpi.Sum); err != nil {
			return err
		}
		if r.Rank() == 1 {
			comms <- r.CommWorld()
			<-done
			return nil
		}
		defer close(done)
		c1 := <-comms
		return body(b, r.CommWorld(), c1)
	}, opts...)
}

var costTransports = []struct{ name, llp string }{{"llp", ""}, {"nollp", "^tofu"}}

// BenchmarkCostSendRecv is one 8-byte message by blocking Send then Recv.
func BenchmarkCostSendRecv(b *testing.B) {
	for _, tr := range costTransports {
		b.Run(tr.name, func(b *testing.B) {
			softwareCost(b, func(b *testing.B, c0, c1 *mpi.Comm) error {
				sbuf, rbuf := make([]byte, 8), make([]byte, 8)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := c0.Send(sbuf, 1, 1); err != nil {
						return err
					}
					if _, err := c1.Recv(rbuf, 0, 1); err != nil {
						return err
					}
				}
				return nil
			}, "btl", "self,shm", "llp", tr.llp)
		})
	}
}

// BenchmarkCostIsendIrecv is one 8-byte message by Irecv, Isend and two
// Waits.
func BenchmarkCostIsendIrecv(b *testing.B) {
	for _, tr := range costTransports {
		b.Run(tr.name, func(b *testing.B) {
			softwareCost(b, func(b *testing.B, c0, c1 *mpi.Comm) error {
				sbuf, rbuf := make([]byte, 8), make([]byte, 8)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					rr, err := c1.Irecv(rbuf, 0, 1)
					if err != nil {
						return err
					}
					sr, err := c0.Isend(sbuf, 1, 1)
					if err != nil {
						return err
					}
					if _, err := sr.Wait(); err != nil {
						return err
					}
					if _, err := rr.Wait(); err != nil {
						return err
					}
				}
				return nil
			}, "btl", "self,shm", "llp", tr.llp)
		})
	}
}

// BenchmarkCostWindow is osu_bw's loop for 8-byte messages, per message: a
// window of 64 Irecvs, 64 Isends, Waitall on both sides, then the blocking
// acknowledgement.
func BenchmarkCostWindow(b *testing.B) {
	const win = 64
	for _, tr := range costTransports {
		b.Run(tr.name, func(b *testing.B) {
			softwareCost(b, func(b *testing.B, c0, c1 *mpi.Comm) error {
				sbuf, rbuf, ack := make([]byte, 8), make([]byte, 8), make([]byte, 4)
				rreqs := make([]*mpi.Request, win)
				sreqs := make([]*mpi.Request, win)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += win {
					var err error
					for j := range rreqs {
						if rreqs[j], err = c1.Irecv(rbuf, 0, 2); err != nil {
							return err
						}
					}
					for j := range sreqs {
						if sreqs[j], err = c0.Isend(sbuf, 1, 2); err != nil {
							return err
						}
					}
					if err := mpi.Waitall(sreqs, nil); err != nil {
						return err
					}
					if err := mpi.Waitall(rreqs, nil); err != nil {
						return err
					}
					if err := c1.Send(ack, 0, 3); err != nil {
						return err
					}
					if _, err := c0.Recv(ack, 1, 3); err != nil {
						return err
					}
				}
				return nil
			}, "btl", "self,shm", "llp", tr.llp)
		})
	}
}

// BenchmarkCostSizes is BenchmarkCostSendRecv per size, with and without
// the LLP (its limit and slots raised so that every size may take it): what
// the LLP saves, or costs, per size.
func BenchmarkCostSizes(b *testing.B) {
	for _, size := range []int{0, 1, 8, 64, 128, 256, 512} {
		for _, tr := range costTransports {
			b.Run(tr.name+"/"+itoa(size), func(b *testing.B) {
				softwareCost(b, func(b *testing.B, c0, c1 *mpi.Comm) error {
					sbuf, rbuf := make([]byte, size), make([]byte, size)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if err := c0.Send(sbuf, 1, 1); err != nil {
							return err
						}
						if _, err := c1.Recv(rbuf, 0, 1); err != nil {
							return err
						}
					}
					return nil
				}, "btl", "self,shm", "llp", tr.llp, "pml_ob1_llp_max_payload_size", "4k", "llp_tofu_slot_size", "1024")
			})
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// BenchmarkCostMid is one mid-size message by Isend, Recv and Wait, pipelined
// through the ring (the default up to btl_shm_pipeline_limit) and by RGET
// (the pipeline off: the receiver reads with process_vm_readv and sends
// FIN): the software's and the kernel's cost of each protocol per message,
// with no wait for the other core.
func BenchmarkCostMid(b *testing.B) {
	for _, size := range []int{8 << 10, 32 << 10, 64 << 10} {
		for _, proto := range []struct{ name, limit string }{{"pipe", "64k"}, {"rget", "0"}} {
			b.Run(proto.name+"/"+itoa(size), func(b *testing.B) {
				softwareCost(b, func(b *testing.B, c0, c1 *mpi.Comm) error {
					sbuf, rbuf := make([]byte, size), make([]byte, size)
					b.SetBytes(int64(size))
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						r, err := c0.Isend(sbuf, 1, 1)
						if err != nil {
							return err
						}
						if _, err := c1.Recv(rbuf, 0, 1); err != nil {
							return err
						}
						if _, err := r.Wait(); err != nil {
							return err
						}
					}
					return nil
				}, "btl", "self,shm", "btl_shm_pipeline_limit", proto.limit)
			})
		}
	}
}

// BenchmarkCostWindowPost is each side's posting in a window of 64 8-byte
// messages, timed apart from the rest: irecv-ns is one Irecv (all 64 are
// posted first), isend-ns one Isend. Between two processes the receiver
// bounds a window's rate, and its posting is where it spent more than Open
// MPI's (gompi-bench bw --phases beside bench/bw_phases.c); the sender's
// comes next.
func BenchmarkCostWindowPost(b *testing.B) {
	const win = 64
	softwareCost(b, func(b *testing.B, c0, c1 *mpi.Comm) error {
		sbuf, rbuf := make([]byte, 8), make([]byte, 8)
		reqs, sreqs := make([]*mpi.Request, win), make([]*mpi.Request, win)
		var posting, sending time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += win {
			t := time.Now()
			for j := range reqs {
				var err error
				if reqs[j], err = c1.Irecv(rbuf, 0, 2); err != nil {
					return err
				}
			}
			posting += time.Since(t)
			t = time.Now()
			for j := range sreqs {
				var err error
				if sreqs[j], err = c0.Isend(sbuf, 1, 2); err != nil {
					return err
				}
			}
			sending += time.Since(t)
			if err := mpi.Waitall(sreqs, nil); err != nil {
				return err
			}
			if err := mpi.Waitall(reqs, nil); err != nil {
				return err
			}
		}
		b.ReportMetric(float64(posting.Nanoseconds())/float64(b.N), "irecv-ns")
		b.ReportMetric(float64(sending.Nanoseconds())/float64(b.N), "isend-ns")
		return nil
	}, "btl", "self,shm")
}
