//go:build !race

#include "textflag.h"

// func prefetchW(p *byte)
// PREFETCHW (0F 0D /1): ask for the line in the writable state now, so that
// a later store to it does not wait for another core to give it up.
TEXT ·prefetchW(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET

// func prefetch(p *byte)
// PREFETCHT0: ask for the line to be read into every cache level now,
// without waiting for it.
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET
