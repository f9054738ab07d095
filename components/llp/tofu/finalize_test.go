package tofu_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gompi/gompi/components/llp/tofu"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/internal/mpihook"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mpitest"
)

// tofuModule returns the rank's tofu module.
func tofuModule(r *mpitest.Rank) (llp.Module, error) {
	for _, m := range mpihook.LLPs(r.Instance) {
		if m.Name() == "tofu" {
			return m, nil
		}
	}
	return nil, fmt.Errorf("rank %d has no tofu module", r.Rank())
}

// TestFinalizeWhilePolling: goroutines that poll the module (Progress,
// Peek at the peer's box) while another finalizes it never touch unmapped
// memory, which would end the test binary with "unexpected fault address".
// A hook holds one poller just before its first read of mapped memory
// while Finalize runs (that read must wait, or Finalize must wait for it).
// The peer finalizes first, so that rank 0's Finalize is the last hold on
// the box and the control segment and really unmaps them.
func TestFinalizeWhilePolling(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	const pollers = 6
	for round := 0; round < rounds; round++ {
		mpitest.Run(t, 2, func(r *mpitest.Rank) error {
			m, err := tofuModule(r)
			if err != nil {
				return err
			}
			c := r.CommWorld()
			// Two messages on the LLP: rank 0 takes one, so that its box is
			// mapped, and one stays for Peek to find.
			msg := make([]byte, 8)
			if r.Rank() == 1 {
				for i := 0; i < 2; i++ {
					if err := c.Send(msg, 0, i); err != nil {
						return err
					}
				}
			} else if _, err := c.Recv(msg, 1, 0); err != nil {
				return err
			}
			if s := r.PMLStats(); r.Rank() == 1 && s.LLPHits != 2 {
				return fmt.Errorf("counters %+v: want 2 LLP hits", s)
			}
			rt := r.Runtime()
			if err := rt.Barrier(); err != nil {
				return err
			}
			if r.Rank() == 1 {
				if err := m.Finalize(); err != nil {
					return err
				}
			}
			if err := rt.Barrier(); err != nil {
				return err
			}
			if r.Rank() == 1 {
				return nil
			}
			peeker := m.(llp.MessagePeeker)
			var stop atomic.Bool
			window := testutil.NewWindow()
			tofu.SetTestRead(m, window.Hold)
			var wg sync.WaitGroup
			for g := 0; g < pollers; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; !stop.Load(); i++ {
						// Half the pollers peek, half progress: the message
						// left in the box goes once Progress delivers it.
						if g%2 == 0 {
							if _, ok := peeker.Peek(1); ok {
								peeker.Done(1, false)
							}
						} else {
							m.Progress()
						}
						if i%64 == 0 {
							runtime.Gosched()
						}
					}
				}()
			}
			<-window.In()
			window.Begin()
			err = m.Finalize()
			window.End()
			stop.Store(true)
			wg.Wait()
			return err
		}, mpitest.WithMCA("btl", "self,shm"))
	}
}
