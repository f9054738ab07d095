package mpi_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// allocRuns is how many ping-pongs AllocsPerRun averages over; it runs one
// more first, unmeasured, and the echoing rank must answer every one.
const allocRuns = 200

// pingPongAllocs measures, on rank 0, the allocations of one round trip of
// an 8-byte message made by exchange (rank 0's side; the echo is rank 1's),
// counting both ranks' allocations, since AllocsPerRun counts every
// goroutine's. A few round trips first fill the free lists and make the
// shared-memory boxes.
func pingPongAllocs(t *testing.T, exchange func(c *mpi.Comm, buf []byte, peer int) error, mca ...string) {
	t.Helper()
	pingPongAllocsOf(t, 8, exchange, mca...)
}

// pingPongAllocsOf is pingPongAllocs for messages of n bytes.
func pingPongAllocsOf(t *testing.T, n int, exchange func(c *mpi.Comm, buf []byte, peer int) error, mca ...string) {
	t.Helper()
	if raceEnabled {
		t.Skip("the race detector makes free lists allocate")
	}
	var opts []mpitest.Option
	for i := 0; i+1 < len(mca); i += 2 {
		opts = append(opts, mpitest.WithMCA(mca[i], mca[i+1]))
	}
	var got float64
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		buf := make([]byte, n)
		peer := 1 - c.Rank()
		for i := 0; i < 20; i++ {
			if err := exchange(c, buf, peer); err != nil {
				return err
			}
		}
		if c.Rank() == 1 {
			for i := 0; i < allocRuns+1; i++ {
				if err := exchange(c, buf, peer); err != nil {
					return err
				}
			}
			return nil
		}
		var err error
		got = testing.AllocsPerRun(allocRuns, func() {
			if err == nil {
				err = exchange(c, buf, peer)
			}
		})
		return err
	}, opts...)
	if got != 0 {
		t.Errorf("%v allocations per round trip of %d bytes; want none in steady state", got, n)
	}
}

// Blocking Send and Recv of a small message allocate nothing once running,
// on the LLP and off it.
func TestSendRecvAllocs(t *testing.T) {
	for _, mca := range [][]string{{"btl", "self,shm"}, {"btl", "self,shm", "llp", "^tofu"}} {
		t.Run(fmt.Sprint(mca), func(t *testing.T) {
			pingPongAllocs(t, func(c *mpi.Comm, buf []byte, peer int) error {
				if c.Rank() == 0 {
					if err := c.Send(buf, peer, 3); err != nil {
						return err
					}
					_, err := c.Recv(buf, peer, 3)
					return err
				}
				if _, err := c.Recv(buf, peer, 3); err != nil {
					return err
				}
				return c.Send(buf, peer, 3)
			}, mca...)
		})
	}
}

// Isend, Irecv and Wait of a small message allocate nothing once running:
// requests come from free lists.
func TestIsendIrecvAllocs(t *testing.T) {
	for _, mca := range [][]string{{"btl", "self,shm"}, {"btl", "self,shm", "llp", "^tofu"}} {
		t.Run(fmt.Sprint(mca), func(t *testing.T) {
			pingPongAllocs(t, func(c *mpi.Comm, buf []byte, peer int) error {
				if c.Rank() == 0 {
					rr, err := c.Irecv(buf, peer, 4)
					if err != nil {
						return err
					}
					sr, err := c.Isend(buf, peer, 4)
					if err != nil {
						return err
					}
					if _, err := sr.Wait(); err != nil {
						return err
					}
					_, err = rr.Wait()
					return err
				}
				rr, err := c.Irecv(buf, peer, 4)
				if err != nil {
					return err
				}
				if _, err := rr.Wait(); err != nil {
					return err
				}
				sr, err := c.Isend(buf, peer, 4)
				if err != nil {
					return err
				}
				_, err = sr.Wait()
				return err
			}, mca...)
		})
	}
}

// Isend and Irecv completed with Test alone and then freed allocate
// nothing once running: Free gives the requests back as Wait does.
func TestIsendIrecvTestedAllocs(t *testing.T) {
	pingPongAllocs(t, func(c *mpi.Comm, buf []byte, peer int) error {
		rr, err := c.Irecv(buf, peer, 5)
		if err != nil {
			return err
		}
		if c.Rank() == 1 {
			if err := testFree(rr, nil); err != nil {
				return err
			}
		}
		sr, err := c.Isend(buf, peer, 5)
		if err != nil {
			return err
		}
		if err := testFree(sr, nil); err != nil {
			return err
		}
		if c.Rank() == 0 {
			return testFree(rr, nil)
		}
		return nil
	}, "btl", "self,shm")
}

// A synchronous send of a small message and its receive allocate nothing
// once running: the sender's request goes back when the receiver's ACK ends
// it, the receiver's ACK is written in its request, and the message, which
// arrives before its receive is posted half the time, comes from a free
// list; on shm and, for the message that waits for its receive, on tcp.
func TestSsendAllocs(t *testing.T) {
	for _, btl := range []string{"self,shm", "self,tcp"} {
		t.Run(btl, func(t *testing.T) {
			pingPongAllocs(t, func(c *mpi.Comm, buf []byte, peer int) error {
				if c.Rank() == 0 {
					if err := c.Ssend(buf, peer, 6); err != nil {
						return err
					}
					_, err := c.Recv(buf, peer, 6)
					return err
				}
				if _, err := c.Recv(buf, peer, 6); err != nil {
					return err
				}
				return c.Ssend(buf, peer, 6)
			}, "btl", btl)
		})
	}
}

// Blocking Send and Recv allocate nothing once running at any size, on
// every protocol: eager, pipelined, single copy (shm) and fragments after
// an ACK (tcp, whose send goes back to the free list once its last
// fragment is out). Waits poll without sleeping: a sleep makes a timer.
func TestSendRecvSizesAllocs(t *testing.T) {
	for _, btl := range []string{"self,shm", "self,tcp"} {
		for _, n := range []int{1 << 10, 8 << 10, 32 << 10, 256 << 10, 1 << 20} {
			t.Run(fmt.Sprint(btl, "/", n), func(t *testing.T) {
				pingPongAllocsOf(t, n, func(c *mpi.Comm, buf []byte, peer int) error {
					if c.Rank() == 0 {
						if err := c.Send(buf, peer, 7); err != nil {
							return err
						}
						_, err := c.Recv(buf, peer, 7)
						return err
					}
					if _, err := c.Recv(buf, peer, 7); err != nil {
						return err
					}
					return c.Send(buf, peer, 7)
				}, "btl", btl, "mpi_yield_when_idle", "no")
			})
		}
	}
}

// A request that a Wait freed (MPI_Wait's rule, which lets Isend and Irecv
// reuse requests) fails a second Wait with ErrRequest instead of returning
// a stale status, as long as it has not been handed out again.
func TestSecondWaitFails(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		peer := 1 - c.Rank()
		buf := []int64{int64(c.Rank())}
		got := []int64{-1}
		rr, err := mpi.Irecv(c, got, peer, 5)
		if err != nil {
			return err
		}
		sr, err := mpi.Isend(c, buf, peer, 5)
		if err != nil {
			return err
		}
		for _, q := range []*mpi.Request{sr, rr} {
			if _, err := q.Wait(); err != nil {
				return err
			}
		}
		if got[0] != int64(peer) {
			return fmt.Errorf("received %d, want %d", got[0], peer)
		}
		for _, q := range []*mpi.Request{sr, rr} {
			if _, err := q.Wait(); err != nil && !errors.Is(err, mpi.ErrRequest) {
				return fmt.Errorf("second Wait: %v, want ErrRequest or (a request not on a free list) success", err)
			}
		}
		if _, err := rr.Wait(); !errors.Is(err, mpi.ErrRequest) {
			return fmt.Errorf("second Wait on the eager receive: %v, want ErrRequest", err)
		}
		return nil
	})
}

// A loop that completes its receives and sends with Waitany, or with
// Testany, allocates nothing once running: the request each returns goes
// back to its free list, as Wait's does.
func TestWaitanyAllocs(t *testing.T) {
	for _, name := range []string{"Waitany", "Testany"} {
		t.Run(name, func(t *testing.T) {
			// any completes both of reqs with the function named.
			any := func(reqs []*mpi.Request) error {
				for k := 0; k < 2; {
					var i int
					var err error
					if name == "Waitany" {
						i, _, err = mpi.Waitany(reqs)
					} else {
						var ok bool
						if i, _, ok, err = mpi.Testany(reqs); !ok {
							runtime.Gosched() // the peer's goroutine may need this core
							continue
						}
					}
					if err != nil {
						return err
					}
					if i == mpi.Undefined {
						return fmt.Errorf("%s: no active request with %d of 2 complete", name, k)
					}
					k++
				}
				return nil
			}
			pingPongAllocs(t, func(c *mpi.Comm, buf []byte, peer int) error {
				var reqs [2]*mpi.Request
				var err error
				if reqs[0], err = c.Irecv(buf, peer, 8); err != nil {
					return err
				}
				if reqs[1], err = c.Isend(buf[:len(buf)/2], peer, 8); err != nil {
					return err
				}
				return any(reqs[:])
			}, "btl", "self,shm", "mpi_yield_when_idle", "no")
		})
	}
}

// Irecv, Isend and Wait allocate nothing once running at any size either:
// a receive completed by a rendezvous (single copy, fragments, pipeline)
// goes back to its free list through the Wait, as an eager one does.
func TestIsendIrecvSizesAllocs(t *testing.T) {
	for _, btl := range []string{"self,shm", "self,tcp"} {
		for _, n := range []int{1 << 10, 32 << 10, 256 << 10, 1 << 20} {
			t.Run(fmt.Sprint(btl, "/", n), func(t *testing.T) {
				pingPongAllocsOf(t, n, func(c *mpi.Comm, buf []byte, peer int) error {
					rr, err := c.Irecv(buf, peer, 9)
					if err != nil {
						return err
					}
					if c.Rank() == 1 {
						if _, err := rr.Wait(); err != nil {
							return err
						}
					}
					sr, err := c.Isend(buf, peer, 9)
					if err != nil {
						return err
					}
					if _, err := sr.Wait(); err != nil {
						return err
					}
					if c.Rank() == 0 {
						_, err = rr.Wait()
					}
					return err
				}, "btl", btl, "mpi_yield_when_idle", "no")
			})
		}
	}
}

// Messages that arrive before their receive is posted (a rank ahead of its
// peer) allocate nothing once running either, up to a shm eager message:
// each round rank 0 sends a burst, then a go-ahead on another tag; rank 1's
// receive of the go-ahead moves the burst to the unexpected queue, and its
// receives then take it from there. Over tcp, the eager messages above 4
// KiB (ob1's kept room) allocate, and are not asked about.
func TestUnexpectedAllocs(t *testing.T) {
	const burst = 8
	for _, btl := range []string{"self,shm", "self,tcp"} {
		for _, n := range []int{8, 64, 1 << 10, 4000} {
			t.Run(fmt.Sprint(btl, "/", n), func(t *testing.T) {
				var unexpected uint64
				pingPongAllocsOf(t, n, func(c *mpi.Comm, buf []byte, peer int) error {
					if c.Rank() == 0 {
						for i := 0; i < burst; i++ {
							if err := c.Send(buf, peer, 1); err != nil {
								return err
							}
						}
						if err := c.Send(buf[:1], peer, 2); err != nil {
							return err
						}
						_, err := c.Recv(buf[:1], peer, 3)
						return err
					}
					if _, err := c.Recv(buf[:1], peer, 2); err != nil {
						return err
					}
					for i := 0; i < burst; i++ {
						if _, err := c.Recv(buf, peer, 1); err != nil {
							return err
						}
					}
					unexpected = c.Instance().PMLStats().Unexpected
					return c.Send(buf[:1], peer, 3)
				}, "btl", btl, "mpi_yield_when_idle", "no")
				if want := uint64(burst * (allocRuns + 21)); unexpected < want {
					t.Errorf("%d messages went through the unexpected queue, want %d or more: the test no longer tests it", unexpected, want)
				}
			})
		}
	}
}
