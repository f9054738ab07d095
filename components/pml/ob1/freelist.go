package ob1

import (
	"sync"
	"sync/atomic"
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

// linked is a request type that carries its own free-list link.
type linked[T any] interface {
	*T
	freeLink() **T
}

// lockedPool is a free list that lives under a lock its owner takes anyway
// where requests are made (a communicator's matching lock for receives, a
// peer's send lock for immediate sends), so that taking a request costs no
// locked instruction of its own. Requests come back from any goroutine (the
// Wait that returns them) onto an atomic stack, one compare-and-swap each;
// get takes that stack whole, with one swap, when its own list is empty.
// Taking the whole stack cannot suffer ABA, and a push owns its item, so
// the stack needs no tags. Locked instructions are most of a small
// message's software cost (BenchmarkCostWindow: the two mutexes of a free
// list's get and put were a quarter of the receiver's time).
type lockedPool[T any, P linked[T]] struct {
	items    []P               // under the owner's lock
	returned atomic.Pointer[T] // pushed by put, taken by get
}

// get returns a free request or a new one. The caller holds the owner's
// lock.
func (p *lockedPool[T, P]) get() P {
	if n := len(p.items); n > 0 {
		x := p.items[n-1]
		p.items[n-1] = nil
		p.items = p.items[:n-1]
		return x
	}
	head := P(p.returned.Swap(nil))
	if head == nil {
		return P(new(T))
	}
	for x := *head.freeLink(); x != nil; {
		item := P(x)
		x, *item.freeLink() = *item.freeLink(), nil
		if len(p.items) < maxFree {
			p.items = append(p.items, item)
		}
	}
	*head.freeLink() = nil
	return head
}

// put gives x back, from any goroutine; the caller must not use x after.
func (p *lockedPool[T, P]) put(x P) {
	for {
		old := p.returned.Load()
		*x.freeLink() = old
		if p.returned.CompareAndSwap(old, (*T)(x)) {
			return
		}
	}
}
