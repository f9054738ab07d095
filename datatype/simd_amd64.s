//go:build !purego

#include "textflag.h"

// Elementwise kernels over AVX2: io[i] = io[i] OP in[i] for i < n, where n is
// a multiple of the vector width (4 float64, 8 float32, 4 int64, 8 int32);
// the caller does the tail. Sixteen float64 (or their width in the other
// types) per pass, four registers in flight; unaligned loads and stores.
// VZEROUPPER at the end spares later SSE code the transition penalty.

#define KERNEL(name, LOAD, OP, STORE, wide, narrow) \
TEXT name(SB), NOSPLIT, $0-24 \
	MOVQ in+0(FP), SI \
	MOVQ io+8(FP), DI \
	MOVQ n+16(FP), CX \
wideLoop: \
	CMPQ CX, $wide \
	JL narrowLoop \
	LOAD 0(DI), Y0 \
	LOAD 32(DI), Y1 \
	LOAD 64(DI), Y2 \
	LOAD 96(DI), Y3 \
	OP 0(SI), Y0, Y0 \
	OP 32(SI), Y1, Y1 \
	OP 64(SI), Y2, Y2 \
	OP 96(SI), Y3, Y3 \
	STORE Y0, 0(DI) \
	STORE Y1, 32(DI) \
	STORE Y2, 64(DI) \
	STORE Y3, 96(DI) \
	ADDQ $128, SI \
	ADDQ $128, DI \
	SUBQ $wide, CX \
	JMP wideLoop \
narrowLoop: \
	CMPQ CX, $narrow \
	JL done \
	LOAD 0(DI), Y0 \
	OP 0(SI), Y0, Y0 \
	STORE Y0, 0(DI) \
	ADDQ $32, SI \
	ADDQ $32, DI \
	SUBQ $narrow, CX \
	JMP narrowLoop \
done: \
	VZEROUPPER \
	RET

// func addF64(in, io *float64, n int)
KERNEL(·addF64, VMOVUPD, VADDPD, VMOVUPD, 16, 4)

// func mulF64(in, io *float64, n int)
KERNEL(·mulF64, VMOVUPD, VMULPD, VMOVUPD, 16, 4)

// func addF32(in, io *float32, n int)
KERNEL(·addF32, VMOVUPS, VADDPS, VMOVUPS, 32, 8)

// func mulF32(in, io *float32, n int)
KERNEL(·mulF32, VMOVUPS, VMULPS, VMOVUPS, 32, 8)

// func addI64(in, io *int64, n int)
KERNEL(·addI64, VMOVDQU, VPADDQ, VMOVDQU, 16, 4)

// func addI32(in, io *int32, n int)
KERNEL(·addI32, VMOVDQU, VPADDD, VMOVDQU, 32, 8)
