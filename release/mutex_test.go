package release

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Goroutines, more than the cores, add to plain counters under the lock:
// no increment is lost, and every holder sees the stores of the one before
// (the race detector checks that ordering under -race).
func TestMutexExcludes(t *testing.T) {
	const goroutines, rounds = 8, 20000
	var m Mutex
	var a, b int
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				m.Lock()
				if a != b {
					t.Errorf("inside the lock: a = %d, b = %d", a, b)
				}
				a++
				runtime.Gosched() // widen the window another holder would use
				b++
				m.Unlock()
			}
		}()
	}
	wg.Wait()
	if a != goroutines*rounds || b != a {
		t.Fatalf("a = %d, b = %d, want %d", a, b, goroutines*rounds)
	}
}

// TryLock fails while the lock is held and succeeds once it is free; a
// Lock that waits past its yields (into its sleeps) still takes the lock
// when the holder lets go.
func TestMutexTryLockAndLongHold(t *testing.T) {
	var m Mutex
	if !m.TryLock() {
		t.Fatal("TryLock of a free Mutex failed")
	}
	if m.TryLock() {
		t.Fatal("TryLock of a held Mutex succeeded")
	}
	got := make(chan time.Time, 1)
	go func() {
		m.Lock()
		at := time.Now()
		m.Unlock()
		got <- at
	}()
	const hold = 30 * time.Millisecond
	time.Sleep(hold)
	released := time.Now()
	m.Unlock()
	select {
	case at := <-got:
		if at.Before(released) {
			t.Fatal("Lock returned while the Mutex was held")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lock never returned after the holder let go")
	}
	if !m.TryLock() {
		t.Fatal("TryLock after the waiter's Unlock failed")
	}
}
