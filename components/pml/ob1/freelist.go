package ob1

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/release"
)

// maxFree bounds a free list, so that a burst of requests does not pin
// their memory for the instance's life.
const maxFree = 1024

// freeList is a free list of *T: a mutex and a stack, for requests taken
// where no lock is held anyway (rendezvous sends).
type freeList[T any] struct {
	mu    sync.Mutex
	items []*T
}

// get returns a free *T, or a new one; its contents are whatever they
// were when put.
func (f *freeList[T]) get() *T {
	f.mu.Lock()
	if n := len(f.items); n > 0 {
		x := f.items[n-1]
		f.items[n-1] = nil
		f.items = f.items[:n-1]
		f.mu.Unlock()
		return x
	}
	f.mu.Unlock()
	return new(T)
}

// put gives x back; the caller must not use it after.
func (f *freeList[T]) put(x *T) {
	f.mu.Lock()
	if len(f.items) < maxFree {
		f.items = append(f.items, x)
	}
	f.mu.Unlock()
}

// pooled is a request type that carries the word its pool reads to know
// whether it came back.
type pooled[T any] interface {
	*T
	poolMark() *atomic.Uint64
}

// lockedPool is a pool of requests that lives under a lock its owner takes
// anyway where requests are made (a communicator's matching lock for
// receives, a peer's send lock for immediate sends), so that taking a
// request costs no locked instruction of its own; and giving one back,
// from any goroutine (the Wait that returns it), costs none either: put is
// a release store of the request's mark. The pool keeps every request it
// made in a ring, in the order they were handed out, and get looks at the
// one handed out longest ago: back by now in a steady stream (a window of
// sends or receives completes before the next). When that one is still
// out, a new request joins the ring in front of it, so the ring grows to
// the number a program keeps out at once, up to maxFree; past that, the
// one still out leaves the ring to the collector. Locked instructions are
// most of a small message's software cost: the compare-and-swap that put
// used to push onto an atomic stack was a tenth of a windowed receiver's
// time.
type lockedPool[T any, P pooled[T]] struct {
	ring []P // under the owner's lock
	next int // the ring's oldest hand-out
}

// get returns a request that came back or a new one. The caller holds the
// owner's lock; the contents are whatever they were when put.
func (p *lockedPool[T, P]) get() P {
	n := len(p.ring)
	if n == 0 {
		x := P(new(T))
		p.ring = append(p.ring, x)
		return x
	}
	i := p.next
	x := p.ring[i]
	switch x.poolMark().Load() {
	case poolBack:
		// Nobody else holds it now: a plain store.
		release.Store(x.poolMark(), poolOut)
		p.next = (i + 1) % n
		return x
	case poolOut:
		if n < maxFree {
			// In front of the one still out, which is looked at again a
			// lap later.
			x = P(new(T))
			p.ring = slices.Insert(p.ring, i, x)
			p.next = (i + 2) % (n + 1)
			return x
		}
	}
	// Dropped, or still out in a full ring: a new request takes its place.
	x = P(new(T))
	p.ring[i] = x
	p.next = (i + 1) % n
	return x
}

// put gives x back, from any goroutine; the caller must not use x after,
// and puts each hand-out once.
func (p *lockedPool[T, P]) put(x P) { release.Store(x.poolMark(), poolBack) }

// drop says x will not come back (nothing will put it): its place in the
// ring goes to a new request, and the collector takes x once its holders
// are done. Without it, a request left to the collector would stay in the
// ring, with the buffer it refers to, until maxFree others had joined.
func (p *lockedPool[T, P]) drop(x P) { release.Store(x.poolMark(), poolGone) }

// A request's pool mark.
const (
	poolOut  = 0 // handed out
	poolBack = 1 // put back: get may hand it out again
	poolGone = 2 // dropped: it will not come back
)
