package ob1

import "sync"

// maxFree bounds a free list, so that a burst of requests does not pin
// their memory for the instance's life.
const maxFree = 1024

// freeList is a free list of *T: a mutex and a stack. Ranks call it from
// one goroutine mostly, so the mutex is uncontended, and it costs less than
// sync.Pool's per-processor pinning did: a windowed 8-byte message 198 ->
// 181 ns (BenchmarkCostWindow).
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
