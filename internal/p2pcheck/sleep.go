package p2pcheck

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gompi/gompi/mpi"
)

// SleepParams make every wait sleep at once, and for long: with them, a
// wait that a message does not wake hangs for a minute and counts a
// timeout, so that a lost wake-up cannot hide behind the periodic look.
var SleepParams = [][2]string{
	{"mpi_yield_when_idle", "yes"},
	{"mpi_wait_spin_us", "0"},
	{"mpi_wait_yield_us", "0"},
	{"mpi_wait_sleep_max_ms", "60000"},
}

const (
	tagLate = 900 + iota
	tagLateWait
	tagLateProbe
	tagPing
	tagSleepA
	tagSleepB
	tagSleepDone
	tagSleepReady
)

// LateSender has rank 0 sleep for delay, while every other rank waits for
// it (in Recv, in Irecv and Wait, or in Probe, by rank), then send to each.
// Every rank must have slept and been woken by the message, never by the
// periodic look (run it with SleepParams).
func LateSender(c *mpi.Comm, delay time.Duration) error {
	me, n := c.Rank(), c.Size()
	inst := c.Instance()
	before := inst.WaitStats()
	if me == 0 {
		time.Sleep(delay)
		for r := 1; r < n; r++ {
			tag := []int{tagLate, tagLateWait, tagLateProbe}[r%3]
			if err := mpi.Send(c, []int64{int64(r)}, r, tag); err != nil {
				return err
			}
		}
		return nil
	}
	got := []int64{-1}
	var err error
	switch me % 3 {
	case 0:
		_, err = mpi.Recv(c, got, 0, tagLate)
	case 1:
		var r *mpi.Request
		if r, err = mpi.Irecv(c, got, 0, tagLateWait); err == nil {
			_, err = r.Wait()
		}
	case 2:
		if _, err = c.Probe(0, tagLateProbe); err == nil {
			_, err = mpi.Recv(c, got, 0, tagLateProbe)
		}
	}
	if err != nil {
		return err
	}
	if got[0] != int64(me) {
		return fmt.Errorf("received %d, want %d", got[0], me)
	}
	return checkWoken(inst, before, "waiting %v for rank 0", delay)
}

// checkWoken says whether the instance slept since before and was always
// woken by a ring.
func checkWoken(inst *mpi.Instance, before mpi.WaitStats, what string, a ...any) error {
	s := inst.WaitStats()
	slept, rung, timeouts := s.Sleeps-before.Sleeps, s.Rung-before.Rung, s.Timeouts-before.Timeouts
	switch {
	case slept == 0:
		return fmt.Errorf("%s: the wait never slept (wait policy %+v)", fmt.Sprintf(what, a...), inst.WaitPolicy())
	case timeouts != 0:
		return fmt.Errorf("%s: %d of %d sleeps ended by timeout: a lost wake-up", fmt.Sprintf(what, a...), timeouts, slept)
	case rung == 0:
		return fmt.Errorf("%s: %d sleeps, none woken by a ring", fmt.Sprintf(what, a...), slept)
	}
	return nil
}

// SleepPingPong has ranks 0 and 1 exchange rounds messages, each waiting
// (and, with SleepParams, sleeping) for the other's, while the other ranks
// sleep until the end. No sleep may end by timeout.
func SleepPingPong(c *mpi.Comm, rounds int) error {
	me, n := c.Rank(), c.Size()
	inst := c.Instance()
	before := inst.WaitStats()
	buf := []int32{0}
	switch {
	case me > 1:
		// Say so first: rank 0 ends the wait only after this rank is in
		// it, however late the scheduler ran it (a fast ping-pong could
		// otherwise end before the wait began, and it would never sleep).
		if err := mpi.Send(c, buf, 0, tagSleepReady); err != nil {
			return err
		}
		if _, err := mpi.Recv(c, buf, 0, tagSleepDone); err != nil {
			return err
		}
		return checkWoken(inst, before, "an idle rank")
	case n == 1:
		return nil
	}
	peer := 1 - me
	for i := 0; i < rounds; i++ {
		if me == 0 {
			buf[0] = int32(i)
			if err := mpi.Send(c, buf, peer, tagPing); err != nil {
				return err
			}
			if _, err := mpi.Recv(c, buf, peer, tagPing); err != nil {
				return err
			}
			if buf[0] != int32(i)+1 {
				return fmt.Errorf("round %d: got %d back, want %d", i, buf[0], i+1)
			}
		} else {
			if _, err := mpi.Recv(c, buf, peer, tagPing); err != nil {
				return err
			}
			buf[0]++
			if err := mpi.Send(c, buf, peer, tagPing); err != nil {
				return err
			}
		}
	}
	if me == 0 {
		for r := 2; r < n; r++ {
			if _, err := mpi.Recv(c, buf, r, tagSleepReady); err != nil {
				return err
			}
		}
		// Time for the idle ranks to fall asleep in the wait they began.
		time.Sleep(20 * time.Millisecond)
		for r := 2; r < n; r++ {
			if err := mpi.Send(c, buf, r, tagSleepDone); err != nil {
				return err
			}
		}
	}
	if err := checkWoken(inst, before, "%d rounds of ping-pong", rounds); err != nil {
		return err
	}
	// Most waits must have slept: the answer takes longer than no spin.
	// Counted over both ranks: on a loaded machine one of them is often
	// descheduled between its send and its wait and finds the answer
	// there, but then the other waited the longer, and slept.
	slept := inst.WaitStats().Sleeps - before.Sleeps
	var mine, theirs [1]uint64
	mine[0] = slept
	if _, err := mpi.Sendrecv(c, mine[:], peer, tagPing, theirs[:], peer, tagPing); err != nil {
		return err
	}
	if total := slept + theirs[0]; total < uint64(rounds)/2 {
		return fmt.Errorf("%d rounds of ping-pong slept only %d times (this rank %d, its peer %d)", rounds, total, slept, theirs[0])
	}
	return nil
}

// SleepTogether has two goroutines of rank 1 sleep at once, one in Recv and
// one in Probe, while a third receives: rank 0 sends the third's message
// first, then the others' in the reverse order of their posting. The Probe
// is woken by the third goroutine's progress, which delivers its message
// into the unexpected queue, not by a completion.
func SleepTogether(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	if n < 2 || me > 1 {
		return nil
	}
	if me == 0 {
		time.Sleep(20 * time.Millisecond) // let rank 1's goroutines fall asleep
		for _, tag := range []int{tagSleepDone, tagSleepB, tagSleepA} {
			if err := mpi.Send(c, []int32{int32(tag)}, 1, tag); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, tag := range []int{tagSleepA, tagSleepB, tagSleepDone} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := []int32{0}
			var err error
			if tag == tagSleepB {
				if _, err = c.Probe(0, tag); err != nil {
					errs[i] = err
					return
				}
			}
			if _, err = mpi.Recv(c, buf, 0, tag); err == nil && buf[0] != int32(tag) {
				err = fmt.Errorf("tag %d: got %d", tag, buf[0])
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
