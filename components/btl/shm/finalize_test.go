package shm_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gompi/gompi/components/btl/shm"
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mpitest"
)

// TestFinalizeWhilePolling: goroutines that poll the module (Peek at the
// peer's ring, Progress) while another finalizes it never touch unmapped
// memory, which would end the test binary with "unexpected fault address".
// A hook holds one poller just before its read of the ring while Finalize
// runs (that read must wait, or Finalize must wait for it). The peer
// finalizes first, so that rank 0's Finalize is the last hold on
// the box and its control segment and really unmaps them.
func TestFinalizeWhilePolling(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	const pollers = 6
	for round := 0; round < rounds; round++ {
		mpitest.Run(t, 2, func(r *mpitest.Rank) error {
			var got atomic.Int64
			r.BML().RegisterRecv(btl.TagUser, func(int, btl.Tag, []byte) { got.Add(1) })
			rt := r.Runtime()
			if err := rt.Barrier(); err != nil {
				return err
			}
			p := r.BML().Peer(1 - r.Rank()).Send[0]
			if p.Attr.Name != "shm" {
				return fmt.Errorf("route %s", p.Attr.Name)
			}
			if r.Rank() == 1 {
				// Two fragments: rank 0 takes one, so that its box is
				// mapped, and one stays for Peek to find.
				for i := 0; i < 2; i++ {
					if err := sendAll(r, p, make([]byte, 8)); err != nil {
						return err
					}
				}
			} else {
				spin(r, func() bool { return got.Load() > 0 })
			}
			if err := rt.Barrier(); err != nil {
				return err
			}
			if r.Rank() == 1 {
				if err := p.Module.Finalize(); err != nil {
					return err
				}
			}
			if err := rt.Barrier(); err != nil {
				return err
			}
			if r.Rank() == 1 {
				return nil
			}
			peeker := p.Module.(btl.FragmentPeeker)
			// The window: one poller, about to read the ring, stays there
			// until Finalize has returned, or (when Finalize waits for it)
			// for a while.
			var stop atomic.Bool
			window := testutil.NewWindow()
			shm.SetTestRead(p.Module, window.Hold)
			var wg sync.WaitGroup
			for g := 0; g < pollers; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; !stop.Load(); i++ {
						if _, _, ok := peeker.Peek(p.EP); ok {
							peeker.Done(p.EP, false)
						}
						p.Module.Progress()
						if i%64 == 0 {
							runtime.Gosched()
						}
					}
				}()
			}
			<-window.In()
			window.Begin()
			err := p.Module.Finalize()
			window.End()
			stop.Store(true)
			wg.Wait()
			return err
		}, shmOnly()...)
	}
}
