package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/collcheck"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
	"github.com/gompi/gompi/rte"
)

// Every nonblocking and every persistent collective gives the blocking
// one's result at sizes 1-17 and 65, on the world and on
// sub-communicators: four in flight at once, completed in an order each
// rank picks at random (Waitall, Wait one by one, Waitany, Testall), with a
// blocking Allreduce and point-to-point messages on the same communicator
// while they are in flight; persistent ones start twice, with new inputs
// the second time.
func TestNonblockingCollectives(t *testing.T) {
	for _, m := range []collcheck.Mode{collcheck.Nonblocking, collcheck.Persistent} {
		t.Run(m.String(), func(t *testing.T) {
			runCollSuite(t, collSizes(), collcheck.Options{Mode: m, Counts: []int{0, 1, 7}, Runs: 2}, "")
		})
	}
}

// The same at 129 ranks, on the world: the trees' and rings' rounds past
// 128. Persistent ones start once here: their restarts are the sizes
// below's.
func TestNonblockingCollectives129(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 129 goroutine ranks take the longest")
	}
	for _, m := range []collcheck.Mode{collcheck.Nonblocking, collcheck.Persistent} {
		t.Run(m.String(), func(t *testing.T) {
			mpitest.Run(t, 129, func(r *mpitest.Rank) error {
				// One count past zero: the sizes below run 0, 1 and 7.
				return collcheck.Run(r.CommWorld(), collcheck.Options{Mode: m, Counts: []int{7}, Runs: 1})
			})
		})
	}
}

// With the progress goroutine on, a nonblocking collective completes while
// every rank computes without calling MPI: its request is done (Done does
// not progress) before anyone calls Wait. With it off, nothing advances the
// collective until a rank calls in, so the same loop never sees it done on
// rank 0: the test's other half, and the reason the goroutine exists. Rank
// 0 starts first and rank 1 only once rank 0's Start has returned, so that
// rank 0's Start cannot have found rank 1's part already there (rank 1's
// Start may, and then completes the run itself).
func TestNonblockingProgressesAlone(t *testing.T) {
	const n = 2
	for _, c := range []struct {
		async    string
		complete bool
	}{{"yes", true}, {"no", false}} {
		t.Run("mpi_async_progress="+c.async, func(t *testing.T) {
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				for _, size := range []int{1, 1 << 14} {
					send := make([]float64, size)
					for i := range send {
						send[i] = float64(w.Rank() + i)
					}
					recv := make([]float64, size)
					var token [1]byte
					if w.Rank() == 1 {
						if _, err := w.Recv(token[:], 0, 9); err != nil {
							return err
						}
					}
					req, err := mpi.Iallreduce(w, send, recv, mpi.Sum)
					if err != nil {
						return err
					}
					if w.Rank() == 0 {
						if err := w.Send(token[:], 1, 9); err != nil {
							return err
						}
					}
					// Compute without MPI; a generous bound when the
					// collective should complete, a short one when it
					// should not.
					bound := 10 * time.Second
					if !c.complete {
						bound = 300 * time.Millisecond
					}
					doneBeforeWait := computeUntil(req, bound)
					if doneBeforeWait != c.complete && (w.Rank() == 0 || c.complete) {
						return fmt.Errorf("%d float64: done before Wait after computing up to %v: %v, want %v",
							size, bound, doneBeforeWait, c.complete)
					}
					if _, err := req.Wait(); err != nil {
						return err
					}
					for _, i := range []int{0, size - 1} {
						if want := float64(n*(n-1)/2 + n*i); recv[i] != want {
							return fmt.Errorf("%d float64: element %d is %v, want %v", size, i, recv[i], want)
						}
					}
				}
				return nil
			}, mpitest.WithMCA("mpi_async_progress", c.async))
		})
	}
}

// computeUntil spins on floating-point work, without calling MPI, until req
// is done or bound has passed, and reports whether it is done. It yields
// the processor between slices: the goroutine ranks and their progress
// goroutines share the cores.
func computeUntil(req *mpi.Request, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	x := 1.0
	for !req.Done() {
		if time.Now().After(deadline) {
			return false
		}
		for i := 0; i < 1000; i++ {
			x = x*1.0000001 + 1e-9
		}
		runtime.Gosched()
	}
	sink.Store(math.Float64bits(x))
	return true
}

// sink keeps the computation from being optimised away.
var sink atomic.Uint64

// A program whose goroutine is locked to its OS thread (LockOSThread, as
// programs that call C libraries do) may start and wait for nonblocking
// collectives while the progress goroutine advances them too: a
// collective resumed by a goroutine of another locking than the one that
// made it must not abort the process (Go's iter.Pull coroutines would).
func TestNonblockingFromLockedThread(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if w.Rank() != 1 {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		sum := []int64{0}
		p, err := mpi.AllreduceInit(w, []int64{1}, sum, mpi.Sum)
		if err != nil {
			return err
		}
		for i := 0; i < 50; i++ {
			recv := []int64{0}
			req, err := mpi.Iallreduce(w, []int64{int64(i)}, recv, mpi.Sum)
			if err != nil {
				return err
			}
			if err := p.Start(); err != nil {
				return err
			}
			computeUntil(req, time.Duration(i%2)*time.Millisecond)
			if _, err := req.Wait(); err != nil {
				return err
			}
			if _, err := p.Wait(); err != nil {
				return err
			}
			if recv[0] != int64(3*i) || sum[0] != 3 {
				return fmt.Errorf("round %d: sums %d and %d, want %d and 3", i, recv[0], sum[0], 3*i)
			}
		}
		return p.Free()
	}, mpitest.WithMCA("mpi_async_progress", "yes"))
}

// mpi_async_progress=auto runs the progress goroutine only where a rank
// has two cores to itself: alone on this node (when it has two), not when
// the node's ranks leave each one core.
func TestAsyncProgressAuto(t *testing.T) {
	cores := rte.NodeCores()
	for _, c := range []struct {
		ranks int
		want  bool
	}{{1, cores >= 2 && runtime.GOMAXPROCS(0) >= 2}, {max(cores, 2), false}} {
		mpitest.Run(t, c.ranks, func(r *mpitest.Rank) error {
			if got := r.Instance.AsyncProgress(); got != c.want {
				return fmt.Errorf("%d ranks on %d cores: AsyncProgress %v, want %v", c.ranks, cores, got, c.want)
			}
			return nil
		})
	}
}

// sm's nonblocking allreduce in both of its shapes: every rank combining
// everything, and the combining shared out (coll_sm_split_bytes lowered so
// that the suite's counts take it), beside blocking ones in the same
// sequence through the segment.
func TestNonblockingSmAllreduceSplit(t *testing.T) {
	for _, m := range []collcheck.Mode{collcheck.Nonblocking, collcheck.Persistent} {
		t.Run(m.String(), func(t *testing.T) {
			runCollSuite(t, []int{2, 3, 5}, collcheck.Options{Mode: m, Only: []string{"allreduce"}, Counts: []int{1, 7, 300}},
				"", "coll_sm_split_bytes", "8")
		})
	}
}

// Goroutines of one rank start and wait for nonblocking and persistent
// collectives on communicators of their own at the same time, through sm's
// path and through a coroutine (bcast of a size sm does not carry), with
// the progress goroutine on: each gets its own results.
func TestNonblockingFromGoroutines(t *testing.T) {
	const goroutines, rounds = 3, 40
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		comms := make([]*mpi.Comm, goroutines)
		for g := range comms {
			var err error
			if comms[g], err = w.Dup(); err != nil {
				return err
			}
		}
		errs := make(chan error, goroutines)
		for g, c := range comms {
			go func() {
				errs <- func() error {
					sum := []int64{0}
					p, err := mpi.AllreduceInit(c, []int64{int64(g)}, sum, mpi.Sum)
					if err != nil {
						return err
					}
					big := make([]int32, 1<<18+1) // over coll_sm_max_bytes (1 MiB): a coroutine runs it
					for i := 0; i < rounds; i++ {
						if c.Rank() == i%c.Size() {
							for k := range big {
								big[k] = int32(g*1000 + i + k)
							}
						}
						breq, err := mpi.Ibcast(c, big, i%c.Size())
						if err != nil {
							return err
						}
						recv := []int64{0}
						req, err := mpi.Iallreduce(c, []int64{int64(c.Rank() + i + g)}, recv, mpi.Sum)
						if err != nil {
							return err
						}
						if err := p.Start(); err != nil {
							return err
						}
						// A lost run would hang the test: a generous bound
						// makes it a failure instead.
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						for _, q := range []*mpi.Request{p, req, breq} {
							if _, err := q.WaitContext(ctx); err != nil {
								cancel()
								return fmt.Errorf("goroutine %d round %d: %w", g, i, err)
							}
						}
						cancel()
						n := int64(c.Size())
						if want := n*(n-1)/2 + n*int64(i+g); recv[0] != want || sum[0] != n*int64(g) {
							return fmt.Errorf("goroutine %d round %d: sums %d and %d, want %d and %d", g, i, recv[0], sum[0], want, n*int64(g))
						}
						if k := len(big) - 1; big[k] != int32(g*1000+i+k) {
							return fmt.Errorf("goroutine %d round %d: bcast's last element %d, want %d", g, i, big[k], g*1000+i+k)
						}
					}
					return p.Free()
				}()
			}()
		}
		for range comms {
			if err := <-errs; err != nil {
				return err
			}
		}
		for _, c := range comms {
			if err := c.Free(); err != nil {
				return err
			}
		}
		return nil
	}, mpitest.WithMCA("mpi_async_progress", "yes"))
}

// Freeing a communicator with a nonblocking collective still in flight on
// it is an ErrPending error that leaves the communicator whole: the
// collective then completes on it (through coll sm's segment, which a Free
// would have unmapped under it), and Free succeeds afterwards.
func TestFreeWithCollectivePending(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		dup, err := w.Dup()
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			req, err := dup.Ibarrier()
			if err != nil {
				return err
			}
			// Rank 1 has not started its barrier: this one is in flight.
			if err := dup.Free(); !errors.Is(err, mpi.ErrPending) {
				return fmt.Errorf("Free with an Ibarrier in flight: %v, want ErrPending", err)
			}
			if err := w.Send([]byte{1}, 1, 0); err != nil {
				return err
			}
			if _, err := req.Wait(); err != nil {
				return err
			}
		} else {
			if _, err := w.Recv(make([]byte, 1), 0, 0); err != nil {
				return err
			}
			// Nonblocking collectives match nonblocking ones only.
			req, err := dup.Ibarrier()
			if err != nil {
				return err
			}
			if _, err := req.Wait(); err != nil {
				return err
			}
		}
		return dup.Free()
	})
}

// A run that its Start takes to the end (sm's, on the rank that starts
// last and finds every other part there) is complete when the call
// returns: its Wait has nothing left to progress. Nonblocking and
// persistent; rank 1 starts once rank 0's Start has returned.
func TestStartCompletesTheLastRank(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		in, out := []float64{float64(w.Rank() + 1)}, []float64{0}
		// sm's segment, set up by the first call it serves.
		if err := mpi.Allreduce(w, in, out, mpi.Sum); err != nil {
			return err
		}
		pers, err := mpi.AllreduceInit(w, in, out, mpi.Sum)
		if err != nil {
			return err
		}
		starts := []struct {
			name  string
			start func() (*mpi.Request, error)
		}{
			{"Iallreduce", func() (*mpi.Request, error) { return mpi.Iallreduce(w, in, out, mpi.Sum) }},
			{"persistent Start", func() (*mpi.Request, error) { return pers, pers.Start() }},
		}
		for round := 0; round < 3; round++ {
			for _, s := range starts {
				var token [1]byte
				if w.Rank() == 1 {
					if _, err := w.Recv(token[:], 0, 9); err != nil {
						return err
					}
				}
				req, err := s.start()
				if err != nil {
					return err
				}
				doneAtStart := req.Done()
				if w.Rank() == 0 {
					if err := w.Send(token[:], 1, 9); err != nil {
						return err
					}
				}
				if _, err := req.Wait(); err != nil {
					return err
				}
				if out[0] != 3 {
					return fmt.Errorf("%s: sum %v, want 3", s.name, out[0])
				}
				if w.Rank() == 1 && !doneAtStart {
					return fmt.Errorf("round %d, %s: rank 1 found rank 0's part there, yet its request was pending when Start returned", round, s.name)
				}
			}
		}
		return pers.Free()
	}, mpitest.WithMCA("mpi_async_progress", "no"))
}
