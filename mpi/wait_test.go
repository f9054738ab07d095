package mpi_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/internal/p2pcheck"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
	"github.com/gompi/gompi/rte"
)

// transports are the ways a sleeping rank can be reached: shared memory
// with the LLP (a slot write rings), without it (a ring write rings), and
// TCP (the kernel, or a neighbour goroutine rank, rings).
var sleepTransports = []struct{ name, btl, llp string }{
	{"shm+tofu", "self,shm", ""},
	{"shm", "self,shm", "^tofu"},
	{"tcp", "self,tcp", "^tofu"},
}

func sleepOpts(btl, llp string) []mpitest.Option {
	opts := []mpitest.Option{mpitest.WithMCA("btl", btl), mpitest.WithMCA("llp", llp)}
	for _, p := range p2pcheck.SleepParams {
		opts = append(opts, mpitest.WithMCA(p[0], p[1]))
	}
	return opts
}

// Ranks that wait a second for a late sender fall asleep and are woken by
// the message itself, whether they wait in Recv, Wait or Probe.
func TestSleepingRanksWakeForTheirMessage(t *testing.T) {
	for _, tr := range sleepTransports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			mpitest.Run(t, 4, func(r *mpitest.Rank) error {
				return p2pcheck.LateSender(r.CommWorld(), time.Second)
			}, sleepOpts(tr.btl, tr.llp)...)
		})
	}
}

// A thousand rounds of sleep and wake: every wait of a ping-pong sleeps at
// once, and every sleep ends with a ring, never with the periodic look.
func TestThousandSleepWakeRounds(t *testing.T) {
	for _, tr := range sleepTransports {
		t.Run(tr.name, func(t *testing.T) {
			mpitest.Run(t, 3, func(r *mpitest.Rank) error {
				return p2pcheck.SleepPingPong(r.CommWorld(), 1000)
			}, sleepOpts(tr.btl, tr.llp)...)
		})
	}
}

// Goroutines of one rank sleep together and each wakes for its own
// message, a Probe included, whose message only another goroutine's
// progress delivers.
func TestGoroutinesSleepTogether(t *testing.T) {
	for _, tr := range sleepTransports {
		t.Run(tr.name, func(t *testing.T) {
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				for i := 0; i < 20; i++ {
					if err := p2pcheck.SleepTogether(r.CommWorld()); err != nil {
						return err
					}
				}
				return nil
			}, sleepOpts(tr.btl, tr.llp)...)
		})
	}
}

// A rank that waits for a message it sends itself from another goroutine
// sleeps and is woken by the self transport.
func TestSleepingOnSelf(t *testing.T) {
	mpitest.Run(t, 1, func(r *mpitest.Rank) error {
		c := r.CommSelf()
		for i := 0; i < 100; i++ {
			errc := make(chan error, 1)
			go func() {
				time.Sleep(100 * time.Microsecond)
				errc <- mpi.Send(c, []int{i}, 0, 5)
			}()
			got := []int{-1}
			if _, err := mpi.Recv(c, got, 0, 5); err != nil {
				return err
			}
			if err := <-errc; err != nil {
				return err
			}
			if got[0] != i {
				return errors.New("wrong message")
			}
		}
		if s := r.WaitStats(); s.Timeouts != 0 || s.Sleeps == 0 {
			return errors.New("self: the waits did not sleep, or a sleep timed out")
		}
		return nil
	}, sleepOpts("self", "^tofu")...)
}

// The policy follows the job: ranks outnumbering the processors yield,
// mpi_yield_when_idle overrides, and the budgets are the wait parameters'
// values, defaults or set.
func TestWaitPolicyFollowsTheJob(t *testing.T) {
	// One rank more than the processors mpitest counts for its ranks.
	over := min(runtime.GOMAXPROCS(0), rte.NodeCores()) + 1
	mpitest.Run(t, over, func(r *mpitest.Rank) error {
		if p := r.WaitPolicy(); !p.Yield {
			return fmt.Errorf("%d goroutine ranks on this machine do not yield: %s", over, p.Why)
		}
		return nil
	})
	mpitest.Run(t, over, func(r *mpitest.Rank) error {
		if p := r.WaitPolicy(); p.Yield {
			return errors.New("mpi_yield_when_idle=no still yields: " + p.Why)
		}
		return nil
	}, mpitest.WithMCA("mpi_yield_when_idle", "no"))
	budgets := func(r *mpitest.Rank) error {
		get := func(name string) time.Duration {
			_, v, ok := r.Params().Lookup(name)
			if !ok {
				return -1
			}
			return time.Duration(v.Uint())
		}
		spin, yieldFor, sleepMax := get(pml.SpinParam)*time.Microsecond, get(pml.YieldForParam)*time.Microsecond, get(pml.SleepMaxParam)*time.Millisecond
		if p := r.WaitPolicy(); p.Yield || p.Spin != spin || p.YieldFor != yieldFor || p.SleepMax != sleepMax {
			return fmt.Errorf("one rank: policy %+v, want no yield, spin %v, yield for %v, sleep at most %v", p, spin, yieldFor, sleepMax)
		}
		return nil
	}
	mpitest.Run(t, 1, budgets)
	mpitest.Run(t, 1, budgets, mpitest.WithMCA(pml.SpinParam, "7"), mpitest.WithMCA(pml.YieldForParam, "1234"), mpitest.WithMCA(pml.SleepMaxParam, "42"))
}
