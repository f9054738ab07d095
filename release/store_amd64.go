//go:build !race

package release

import (
	"sync/atomic"
	"unsafe"
)

// Store stores v in *p with release ordering: a reader that loads v
// (atomic.Uint64.Load) sees every store this goroutine made before.
func Store(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }

// PrefetchW asks for the cache line holding *p in the writable state,
// without waiting: a producer calls it on the ring line it writes next, so
// that the consumer's copy of that line is given up while the producer does
// other work, rather than during the next fence (any locked instruction,
// such as a mutex's) that waits for the stores before it.
func PrefetchW(p *byte) { prefetchW(p) }

//go:noescape
func prefetchW(p *byte)

// Prefetch asks for the cache line holding *p to be read, without waiting:
// a consumer calls it on ring lines ahead of the record it reads, whose
// position it learns only from the record before, so that their transfers
// from the producer's core overlap instead of following one another.
func Prefetch(p *byte) { prefetch(p) }

//go:noescape
func prefetch(p *byte)
