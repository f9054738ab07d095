package datatype

import "unsafe"

// CopyCached is the builtin copy for buffers that are read again soon, by
// this process or a peer, and returns the bytes copied (the shorter
// length). On amd64 Go's copy of 1 MiB or more writes around the cache
// (non-temporal stores), so the next read of dst, a reduction into it or a
// peer's single-copy read of it, comes from memory: a 2-rank 1 MiB
// recursive-doubling allreduce took 240 µs with its first copy so, 135
// with it in pieces. Pieces below that size keep dst in the cache. A small
// copy is the builtin's, inlined.
//
// It suits what this process reads next. What a peer reads next (an RDMA
// Get of it) is best not copied at all, sent from where it is: a core far
// from this one reads lines in this core's cache one by one, slower than
// memory (a 2-rank 1 MiB allgather that sent a block just copied so took
// 290 µs with the cores apart, 164 with the builtin's copy, 130 sending
// from the program's buffer).
func CopyCached(dst, src []byte) int {
	if len(src) <= CachedPiece || len(dst) <= CachedPiece {
		return copy(dst, src)
	}
	return copyPieces(dst, src)
}

// CachedPiece is the most CopyCached copies at once: half the size from
// which Go's memmove turns non-temporal (runtime/memmove_amd64.s, 1 MiB).
const CachedPiece = 512 << 10

// copyPieces is CopyCached's large case, kept out of line so that the
// small case inlines into its callers.
//
//go:noinline
func copyPieces(dst, src []byte) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	if overlap(dst, src) {
		// Pieces taken front to back would read what they just wrote:
		// copy's memmove keeps overlapping buffers right.
		return copy(dst, src)
	}
	for len(src) > CachedPiece {
		copy(dst[:CachedPiece], src[:CachedPiece])
		dst, src = dst[CachedPiece:], src[CachedPiece:]
	}
	copy(dst, src)
	return n
}

// overlap reports whether a and b, of the same length, share memory.
func overlap(a, b []byte) bool {
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
