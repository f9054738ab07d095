package mpi_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// failedOrRevoked reports whether err is what a survivor gets from a
// collective on a communicator with a dead member.
func failedOrRevoked(err error) bool {
	return errors.Is(err, mpi.ErrProcFailed) || errors.Is(err, mpi.ErrRevoked)
}

// selection is a collective component the failure tests run under, with
// the coll setting that makes it serve (empty: the default).
type selection struct{ name, coll string }

var (
	smSel    = selection{"sm", ""}
	tunedSel = selection{"tuned", "^sm"} // sm would take the small operations
)

func (s selection) opts() []mpitest.Option {
	if s.coll == "" {
		return nil
	}
	return []mpitest.Option{mpitest.WithMCA("coll", s.coll)}
}

// survive is the program of the issue: a loop of Allreduce on the world
// until one fails (the victim dies in iteration dieAt), then Shrink, check
// the size, and 100 Allreduce with the right sums on the survivors.
func survive(r *mpitest.Rank, victim, dieAt int) error {
	w := r.CommWorld()
	var sum [1]int64
	failedAt := -1
	for it := 0; it < 10000; it++ {
		if w.Rank() == victim && it == dieAt {
			r.Die()
		}
		err := w.Barrier()
		if err == nil {
			err = mpi.Allreduce(w, []int64{int64(w.Rank())}, sum[:], mpi.Sum)
		}
		if err != nil {
			if !failedOrRevoked(err) {
				return fmt.Errorf("iteration %d: %w, want ErrProcFailed", it, err)
			}
			failedAt = it
			break
		}
	}
	if failedAt < 0 {
		return fmt.Errorf("no Allreduce failed")
	}
	s, err := w.Shrink()
	if err != nil {
		return err
	}
	if s.Size() != w.Size()-1 {
		return fmt.Errorf("shrunk to %d ranks, want %d", s.Size(), w.Size()-1)
	}
	want := int64(0)
	for q := 0; q < w.Size(); q++ {
		if q != victim {
			want += int64(q)
		}
	}
	for it := 0; it < 100; it++ {
		if err := mpi.Allreduce(s, []int64{int64(w.Rank())}, sum[:], mpi.Sum); err != nil {
			return fmt.Errorf("after Shrink, iteration %d: %w", it, err)
		}
		if sum[0] != want {
			return fmt.Errorf("after Shrink, iteration %d: sum %d, want %d", it, sum[0], want)
		}
	}
	return s.Free()
}

// TestFailureReachesEveryCollective kills a rank in a loop of Allreduce
// under each collective component: every survivor gets ErrProcFailed, and
// Shrink gives them a working communicator.
func TestFailureReachesEveryCollective(t *testing.T) {
	for _, sel := range []selection{smSel, tunedSel, {"basic", "basic,self"}, {"tofu", "tofu,basic,self"}} {
		for _, victim := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/victim%d", sel.name, victim), func(t *testing.T) {
				runBounded(t, 4, func(r *mpitest.Rank) error {
					if tab := r.CommWorld().CollTable(); !strings.Contains(tab, "allreduce="+sel.name) && !strings.Contains(tab, "barrier="+sel.name) {
						return fmt.Errorf("the world's table %q: want %s in it", tab, sel.name)
					}
					return survive(r, victim, 5)
				}, sel.opts()...)
			})
		}
	}
}

// barrierUntilFailed calls Barrier on w until one fails, which must be with
// ErrProcFailed: how a survivor learns of a death.
func barrierUntilFailed(w *mpi.Comm) error {
	for {
		if err := w.Barrier(); err != nil {
			if !errors.Is(err, mpi.ErrProcFailed) {
				return fmt.Errorf("Barrier: %v, want ErrProcFailed", err)
			}
			return nil
		}
	}
}

// runBounded runs an mpitest job and fails the test if it has not ended
// within a generous bound: the tests here are about hangs.
func runBounded(t *testing.T, n int, fn func(r *mpitest.Rank) error, opts ...mpitest.Option) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		mpitest.Run(t, n, fn, opts...)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		panic(t.Name() + ": the job hung")
	}
}

// TestRevokeWakesEveryWait: one rank revokes while the others wait in a
// Recv, in a collective, and in the Wait of an Irecv, on live peers that
// will never answer; every wait ends with ErrRevoked, later calls too, and
// Agree and Shrink still work on the revoked communicator.
func TestRevokeWakesEveryWait(t *testing.T) {
	for _, sel := range []selection{smSel, tunedSel} {
		t.Run(sel.name, func(t *testing.T) {
			runBounded(t, 4, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				var buf [8]byte
				var err error
				switch w.Rank() {
				case 0:
					time.Sleep(30 * time.Millisecond)
					err = w.Revoke()
					if err == nil {
						_, err = w.Recv(buf[:], 1, 7)
					}
				case 1:
					_, err = w.Recv(buf[:], 2, 7)
				case 2:
					err = mpi.Allreduce(w, []int64{1}, make([]int64, 1), mpi.Sum)
				case 3:
					var req *mpi.Request
					if req, err = w.Irecv(buf[:], 0, 7); err == nil {
						_, err = req.Wait()
					}
				}
				if !errors.Is(err, mpi.ErrRevoked) {
					return fmt.Errorf("rank %d: %v, want ErrRevoked", w.Rank(), err)
				}
				if !w.IsRevoked() {
					return fmt.Errorf("IsRevoked is false after a revocation")
				}
				if err := w.Send(buf[:], (w.Rank()+1)%4, 1); !errors.Is(err, mpi.ErrRevoked) {
					return fmt.Errorf("a Send after the revocation: %v, want ErrRevoked", err)
				}
				if err := w.Barrier(); !errors.Is(err, mpi.ErrRevoked) {
					return fmt.Errorf("a Barrier after the revocation: %v, want ErrRevoked", err)
				}
				v, err := w.Agree(0x7 &^ (1 << w.Rank()))
				if err != nil || v != 0x7&^0x7 {
					return fmt.Errorf("Agree on the revoked communicator: %d, %v; want 0", v, err)
				}
				s, err := w.Shrink()
				if err != nil {
					return err
				}
				if s.Size() != 4 {
					return fmt.Errorf("Shrink with nobody dead: %d ranks, want 4", s.Size())
				}
				var sum [1]int64
				if err := mpi.Allreduce(s, []int64{int64(s.Rank())}, sum[:], mpi.Sum); err != nil || sum[0] != 6 {
					return fmt.Errorf("Allreduce after Shrink: %d, %v; want 6", sum[0], err)
				}
				return s.Free()
			}, sel.opts()...)
		})
	}
}

// TestAgreeAcrossDeaths: in each round a rank dies during an agreement
// (the coordinator half-way through sending its decision, or a member
// before it contributes); every survivor gets the same value, the AND of
// the flags with or without the dead rank's.
func TestAgreeAcrossDeaths(t *testing.T) {
	rounds := 50
	if testing.Short() {
		rounds = 10
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	const n = 4
	for round := 0; round < rounds; round++ {
		victim := rng.IntN(n)
		// after: the coordinator dies once it has sent its decision to
		// that many members (0: to one, as it sends the first); -1: the
		// victim dies before it contributes.
		after := rng.IntN(n) - 1
		if victim != 0 && after >= 0 {
			after = -1 // only the coordinator sends decisions
		}
		flags := make([]int, n)
		for q := range flags {
			flags[q] = 0xff &^ (1 << q) // each rank clears its own bit
		}
		var mu sync.Mutex
		got := map[int]int{}
		runBounded(t, n, func(r *mpitest.Rank) error {
			w := r.CommWorld()
			me := w.Rank()
			if me == victim {
				if after < 0 {
					r.Die()
				}
				sent := 0
				r.OnAgreeDecision(func(k uint32, to int) {
					if sent++; sent > after {
						r.Die()
					}
				})
			}
			v, err := w.Agree(flags[me])
			if err != nil {
				return err
			}
			mu.Lock()
			got[me] = v
			mu.Unlock()
			// A second agreement after the death: all survivors again.
			if _, err := w.Agree(1); err != nil {
				return fmt.Errorf("the agreement after: %w", err)
			}
			return nil
		})
		all, without := 0xff, 0xff
		for q := 0; q < n; q++ {
			all &= flags[q]
			if q != victim {
				without &= flags[q]
			}
		}
		var first, seen = -1, 0
		for q, v := range got {
			if q == victim {
				continue // the coordinator may return before it dies
			}
			seen++
			if first < 0 {
				first = v
			}
			if v != first || (v != all && v != without) {
				t.Fatalf("round %d (victim %d, after %d): survivors got %v, want one value, %#x or %#x", round, victim, after, got, all, without)
			}
		}
		if seen != n-1 {
			t.Fatalf("round %d: %d survivors answered, want %d", round, seen, n-1)
		}
	}
}

// nonblockingUntilFailed loops on Iallreduce and Ibcast on the world until
// one fails, which must be with ErrProcFailed (or revoked): the victim
// dies in iteration dieAt. Until then the sums must be right.
func nonblockingUntilFailed(r *mpitest.Rank, victim, dieAt int) error {
	w := r.CommWorld()
	sum := make([]int64, 1)
	data := make([]int32, 100)
	for it := 0; ; it++ {
		if w.Rank() == victim && it == dieAt {
			r.Die()
		}
		r1, err := mpi.Iallreduce(w, []int64{1}, sum, mpi.Sum)
		if err == nil {
			var r2 *mpi.Request
			if r2, err = mpi.Ibcast(w, data, it%4); err == nil {
				err = mpi.Waitall([]*mpi.Request{r1, r2}, nil)
			}
		}
		if err != nil {
			if !failedOrRevoked(err) {
				return fmt.Errorf("iteration %d: %v, want ErrProcFailed", it, err)
			}
			return nil
		}
		if want := int64(w.Size()); sum[0] != want {
			return fmt.Errorf("iteration %d: sum %d, want %d", it, sum[0], want)
		}
	}
}

// TestFailureReachesNonblocking: a rank dies while the others loop on
// Iallreduce and Ibcast (sm's own plans, and tuned's algorithms as
// coroutines): their Waits fail with ErrProcFailed.
func TestFailureReachesNonblocking(t *testing.T) {
	for _, sel := range []selection{smSel, tunedSel} {
		t.Run(sel.name, func(t *testing.T) {
			runBounded(t, 4, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				sum := make([]int64, 1)
				// sm runs its own nonblocking plans once a blocking call
				// has set its segment up.
				if err := mpi.Allreduce(w, []int64{1}, sum, mpi.Sum); err != nil {
					return err
				}
				return nonblockingUntilFailed(r, 1, 7)
			}, sel.opts()...)
		})
	}
}

// TestFailureAcrossNodes: on fake nodes coll han runs the world's
// collectives in phases over parts of it; a rank's death (a node's leader,
// or not) reaches the survivors of every node, also those whose parts do
// not hold the dead rank.
func TestFailureAcrossNodes(t *testing.T) {
	for _, victim := range []int{0, 3} {
		t.Run(fmt.Sprintf("victim%d", victim), func(t *testing.T) {
			runBounded(t, 4, func(r *mpitest.Rank) error {
				if tab := r.CommWorld().CollTable(); !strings.Contains(tab, "allreduce=han") {
					return fmt.Errorf("the world's table %q: want allreduce=han", tab)
				}
				return survive(r, victim, 5)
			}, mpitest.WithNodes([]int{0, 0, 1, 1}), mpitest.WithMCA("btl", "self,shm,tcp"))
		})
	}
}

// TestFailureReachesNonblockingAcrossNodes: the same on fake nodes, where
// coll han runs Iallreduce and Ibcast as phases on its parts, one started
// when the one before completes: a death (a node's leader, or not) fails
// every survivor's Wait, also on the node without the dead rank, whose
// next phase is on a part that never held it.
func TestFailureReachesNonblockingAcrossNodes(t *testing.T) {
	for _, victim := range []int{0, 3} {
		t.Run(fmt.Sprintf("victim%d", victim), func(t *testing.T) {
			runBounded(t, 4, func(r *mpitest.Rank) error {
				return nonblockingUntilFailed(r, victim, 7)
			}, mpitest.WithNodes([]int{0, 0, 1, 1}), mpitest.WithMCA("btl", "self,shm,tcp"))
		})
	}
}

// TestFailedCommunicator: what else a survivor may do on a communicator
// with a dead member. Making communicators from it collectively fails at
// once; point-to-point with live peers works; AnySource receives fail with
// ErrProcFailedPending until AckFailed; Failed names the dead; CreateGroup
// of a group with the dead rank fails on every member, of the survivors
// works; an intercommunicator with the dead rank in the
// other group fails its collectives.
func TestFailedCommunicator(t *testing.T) {
	const victim = 3
	runBounded(t, 4, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		// Groups {0,1} and {2,3}, joined by an intercommunicator.
		half, err := w.Split(w.Rank()/2, 0)
		if err != nil {
			return err
		}
		inter, err := half.IntercommCreate(0, w, 2-2*(w.Rank()/2), 11)
		if err != nil {
			return err
		}
		if w.Rank() == victim {
			r.Die()
		}
		// Every survivor learns of the death through the failure of a
		// collective.
		if err := barrierUntilFailed(w); err != nil {
			return err
		}
		if _, err := w.Dup(); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("Dup: %v, want ErrProcFailed", err)
		}
		if _, err := w.Split(0, 0); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("Split: %v, want ErrProcFailed", err)
		}
		if err := inter.Barrier(); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("Barrier on the intercommunicator: %v, want ErrProcFailed", err)
		}
		g, err := w.Failed()
		if err != nil {
			return err
		}
		if n, _ := g.Size(); n != 1 {
			return fmt.Errorf("Failed: %d ranks, want 1", n)
		}
		if in, err := g.TranslateRanks([]int{0}, w.Group()); err != nil || in[0] != victim {
			return fmt.Errorf("Failed holds rank %v (%v), want %d", in, err, victim)
		}
		// Point to point among survivors 0, 1, 2: a ring.
		var b [1]byte
		if w.Rank() == 0 {
			if err := w.Send([]byte{9}, 1, 3); err != nil {
				return fmt.Errorf("Send to a live rank: %w", err)
			}
			if _, err := w.Recv(b[:], mpi.AnySource, 3); !errors.Is(err, mpi.ErrProcFailedPending) {
				return fmt.Errorf("AnySource receive before AckFailed: %v, want ErrProcFailedPending", err)
			}
			if n, err := w.AckFailed(); err != nil || n != 1 {
				return fmt.Errorf("AckFailed: %d, %v; want 1", n, err)
			}
			if _, err := w.Recv(b[:], mpi.AnySource, 3); err != nil || b[0] != 8 {
				return fmt.Errorf("AnySource receive after AckFailed: %d, %v", b[0], err)
			}
		} else if w.Rank() == 1 {
			if _, err := w.Recv(b[:], 0, 3); err != nil || b[0] != 9 {
				return fmt.Errorf("Recv from a live rank: %d, %v", b[0], err)
			}
			if err := w.Send([]byte{8}, 0, 3); err != nil {
				return err
			}
		}
		// CreateGroup of a group that holds the dead rank: those that
		// wait on it directly and those that wait on them all fail.
		if _, err := w.CreateGroup(w.Group(), 13); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("CreateGroup with the dead rank in the group: %v, want ErrProcFailed", err)
		}
		survivors, err := w.Group().Excl([]int{victim})
		if err != nil {
			return err
		}
		s, err := w.CreateGroup(survivors, 12)
		if err != nil {
			return fmt.Errorf("CreateGroup of the survivors: %w", err)
		}
		var sum [1]int64
		if err := mpi.Allreduce(s, []int64{1}, sum[:], mpi.Sum); err != nil || sum[0] != 3 {
			return fmt.Errorf("Allreduce on CreateGroup's communicator: %d, %v; want 3", sum[0], err)
		}
		return s.Free()
	})
}

// TestAckFailedAfterTheDeathIsDelivered: AckFailed called while a death
// is half delivered (the collectives failed, the AnySource receives not yet)
// waits for the rest: an AnySource receive posted after it gets the live
// sender's message, not ErrProcFailedPending for the acknowledged death.
func TestAckFailedAfterTheDeathIsDelivered(t *testing.T) {
	const victim = 2
	runBounded(t, 3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if w.Rank() == 0 {
			r.OnDeathDelivery(func(int) { time.Sleep(50 * time.Millisecond) })
		}
		if err := w.Barrier(); err != nil { // the hook is set before the death
			return err
		}
		if w.Rank() == victim {
			r.Die()
		}
		if err := barrierUntilFailed(w); err != nil {
			return err
		}
		var b [1]byte
		if w.Rank() == 1 {
			time.Sleep(100 * time.Millisecond) // past rank 0's delivery
			return w.Send([]byte{7}, 0, 5)
		}
		if n, err := w.AckFailed(); err != nil || n != 1 {
			return fmt.Errorf("AckFailed: %d, %v; want 1", n, err)
		}
		if _, err := w.Recv(b[:], mpi.AnySource, 5); err != nil || b[0] != 7 {
			return fmt.Errorf("AnySource receive after AckFailed: %d, %v; want 7", b[0], err)
		}
		return nil
	})
}

// TestShrinkAcrossDeaths: a rank dies in a loop of Allreduce, and another
// during the survivors' Shrink (the agreement's coordinator, half-way
// through sending a decision): the last survivors all get a communicator of
// the same members; when it holds the second dead rank, its collectives
// fail and a second Shrink leaves both out.
func TestShrinkAcrossDeaths(t *testing.T) {
	const n = 5
	for after := 0; after < n-2; after++ {
		t.Run(fmt.Sprintf("after%d", after), func(t *testing.T) {
			var mu sync.Mutex
			members := map[int]string{}
			runBounded(t, n, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				const first, second = 4, 0 // rank 0 coordinates Shrink's agreements
				var sum [1]int64
				for it := 0; ; it++ {
					if w.Rank() == first && it == 3 {
						r.Die()
					}
					if err := mpi.Allreduce(w, []int64{1}, sum[:], mpi.Sum); err != nil {
						if !failedOrRevoked(err) {
							return err
						}
						break
					}
				}
				if w.Rank() == second {
					sent := 0
					r.OnAgreeDecision(func(k uint32, to int) {
						if sent++; sent > after {
							r.Die()
						}
					})
				}
				c, err := w.Shrink()
				if err != nil {
					return err
				}
				// Shrink again while the communicator's collectives fail:
				// the second death reaches it, or it was left out already.
				for k := 0; k < 3; k++ {
					err := mpi.Allreduce(c, []int64{1}, sum[:], mpi.Sum)
					if err == nil {
						break
					}
					if !failedOrRevoked(err) {
						return err
					}
					if c, err = c.Shrink(); err != nil {
						return err
					}
				}
				if c.Size() != n-2 || sum[0] != n-2 {
					return fmt.Errorf("ended with %d ranks summing %d, want %d", c.Size(), sum[0], n-2)
				}
				g := c.Group()
				ranks, err := g.TranslateRanks([]int{0, 1, 2}, w.Group())
				if err != nil {
					return err
				}
				mu.Lock()
				members[w.Rank()] = fmt.Sprint(ranks)
				mu.Unlock()
				return nil
			})
			for q, m := range members {
				if m != "[1 2 3]" {
					t.Errorf("rank %d ended among world ranks %s, want [1 2 3]", q, m)
				}
			}
			if len(members) != n-2 {
				t.Errorf("%d survivors ended, want %d", len(members), n-2)
			}
		})
	}
}
