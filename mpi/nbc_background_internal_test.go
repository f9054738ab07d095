package mpi

import (
	"sync/atomic"
	"testing"
	"time"
)

// fakeBell is a bell that never rings unless the test sends on bg; looks
// counts the goroutine's passes (each asks whether the bell is armed).
type fakeBell struct {
	bg    chan struct{}
	armed atomic.Bool
	looks atomic.Int64
}

func newFakeBell() *fakeBell {
	b := &fakeBell{bg: make(chan struct{}, 1)}
	b.armed.Store(true)
	return b
}

func (b *fakeBell) Background() <-chan struct{} { return b.bg }
func (b *fakeBell) BackgroundArmed() bool       { b.looks.Add(1); return b.armed.Load() }
func (b *fakeBell) DisarmBackground()           { b.armed.Store(false) }

// runLoop runs backgroundLoop until the test ends.
func runLoop(t *testing.T, b *fakeBell, progress func() int, inFlight func() bool, starts func() uint64, recheck time.Duration) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		backgroundLoop(stop, b, progress, inFlight, starts, recheck)
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
}

// waitFor polls cond until it holds or bound passes.
func waitFor(bound time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// A ring that never comes (lost to the store-buffer race rte.Bell's note
// describes) does not keep a run in flight from progressing: the goroutine
// looks again after mpi_async_progress_recheck_us. With 0 it waits for
// rings alone.
func TestBackgroundLooksWithoutRing(t *testing.T) {
	for _, c := range []struct {
		recheck time.Duration
		looks   bool
	}{{time.Millisecond, true}, {0, false}} {
		b := newFakeBell()
		var progressed atomic.Int64
		runLoop(t, b, func() int { progressed.Add(1); return 0 }, func() bool { return true }, func() uint64 { return 1 }, c.recheck)
		bound := 5 * time.Second
		if !c.looks {
			bound = 200 * time.Millisecond
		}
		if got := waitFor(bound, func() bool { return progressed.Load() > 0 }); got != c.looks {
			t.Errorf("recheck %v, armed, a run in flight, no ring: progressed within %v: %v, want %v", c.recheck, bound, got, c.looks)
		}
	}
	// A ring wakes it whatever the recheck.
	b := newFakeBell()
	var progressed atomic.Int64
	runLoop(t, b, func() int { progressed.Add(1); return 0 }, func() bool { return true }, func() uint64 { return 1 }, 0)
	b.bg <- struct{}{}
	if !waitFor(5*time.Second, func() bool { return progressed.Load() > 0 }) {
		t.Error("a ring did not make the goroutine progress")
	}
}

// Once nothing is in flight and the program starts nothing, the goroutine
// disarms and, after lingerRechecks periods, stops looking: nothing runs
// while nothing is pending. Runs started meanwhile (each completed by the
// program before the goroutine looked) keep it looking.
func TestBackgroundLingerEnds(t *testing.T) {
	const recheck = time.Millisecond
	linger := lingerRechecks * recheck

	b := newFakeBell()
	runLoop(t, b, func() int { return 0 }, func() bool { return false }, func() uint64 { return 7 }, recheck)
	if !waitFor(5*time.Second, func() bool { return !b.armed.Load() }) {
		t.Fatal("nothing in flight: the goroutine did not disarm")
	}
	time.Sleep(linger + 300*time.Millisecond)
	before := b.looks.Load()
	time.Sleep(4 * linger)
	if after := b.looks.Load(); after != before {
		t.Errorf("idle for %v after the linger: %d more looks, want none", 4*linger, after-before)
	}

	// A program that keeps starting collectives keeps it looking.
	b = newFakeBell()
	var starts atomic.Uint64
	stopStarting := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopStarting:
				return
			case <-time.After(linger / 5):
				starts.Add(1)
			}
		}
	}()
	defer close(stopStarting)
	runLoop(t, b, func() int { return 0 }, func() bool { return false }, starts.Load, recheck)
	time.Sleep(2 * linger)
	before = b.looks.Load()
	time.Sleep(2 * linger)
	if after := b.looks.Load(); after == before {
		t.Errorf("runs started every %v: no look in %v, want the goroutine still looking", linger/5, 2*linger)
	}
}
