//go:build !amd64 || purego

package datatype

// haveVector: no vector kernels here.
const haveVector = false

// vectorMin is simd_amd64.go's, for the tests that cross it.
const vectorMin = 8

// vectorKernel: no vector kernels on this architecture (or with the purego
// tag): the Go loops serve.
func vectorKernel[E Real](code opCode) func(in, io []E) { return nil }
