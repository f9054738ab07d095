package release

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Mutex is a lock whose Unlock is a release store (Store): no locked
// instruction, where sync.Mutex's Unlock is a locked add that waits for
// every store before it to leave the core. On a message's path that wait
// is paid per lock: a send takes its peer's lock and the transport's, a
// receive the communicator's matching lock, and each unlock comes right
// after the stores of a ring record or a request.
//
// It never parks a goroutine, so an Unlock has nobody to wake and needs no
// fence. A goroutine that finds it held spins briefly, then yields
// (runtime.Gosched), then sleeps for growing times: fit for locks held for
// the length of a message's bookkeeping, which is what it guards. The zero
// Mutex is unlocked; a Mutex must not be copied after first use.
type Mutex struct {
	v atomic.Uint64
}

// TryLock takes m if it is free and reports whether it did.
func (m *Mutex) TryLock() bool { return m.v.Load() == 0 && m.v.CompareAndSwap(0, 1) }

// Lock takes m, waiting while another goroutine holds it.
func (m *Mutex) Lock() {
	if !m.TryLock() {
		m.lockSlow()
	}
}

// Yields before sleeping, and the longest sleep: a holder that waits on
// something slow (a segment's creation on a first send) costs a waiter a
// wake-up per millisecond at most.
const (
	mutexYields   = 128
	mutexMaxSleep = time.Millisecond
)

func (m *Mutex) lockSlow() {
	sleep := time.Microsecond
	for i := 0; ; i++ {
		if m.TryLock() {
			return
		}
		if i < mutexYields {
			runtime.Gosched()
			continue
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, mutexMaxSleep)
	}
}

// Unlock releases m; the caller must hold it. Every store made under m is
// seen by the next holder.
func (m *Mutex) Unlock() { Store(&m.v, 0) }
