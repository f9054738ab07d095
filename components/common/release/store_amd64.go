//go:build !race

package release

import (
	"sync/atomic"
	"unsafe"
)

// Store stores v in *p with release ordering: a reader that loads v
// (atomic.Uint64.Load) sees every store this goroutine made before.
func Store(p *atomic.Uint64, v uint64) { store((*uint64)(unsafe.Pointer(p)), v) }

//go:noescape
func store(p *uint64, v uint64)
