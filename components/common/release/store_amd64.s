//go:build !race

#include "textflag.h"

// func store(p *uint64, v uint64)
// A plain MOV: x86 does not reorder stores with older stores.
TEXT ·store(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, 0(AX)
	RET
