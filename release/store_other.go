//go:build !amd64 || race

package release

import "sync/atomic"

// Store stores v in *p with release ordering: a reader that loads v
// (atomic.Uint64.Load) sees every store this goroutine made before. Here it
// is sync/atomic's store (a full fence where the hardware needs one for
// release, and what the race detector sees).
func Store(p *atomic.Uint64, v uint64) { p.Store(v) }

// PrefetchW does nothing here: see the amd64 version.
func PrefetchW(p *byte) {}

// Prefetch does nothing here: see the amd64 version.
func Prefetch(p *byte) {}
