// Package datatype holds the basic element types that typed communication
// accepts, and the zero-copy view of a slice of them as bytes.
//
// It is a leaf package: anything in gompi may import it.
//
// Go methods cannot have type parameters, so typed calls are package-level
// generic functions (mpi.Send[T], mpi.Recv[T]) constrained by Elem. A []T is
// sent as the bytes of its backing array, in the machine's byte order: gompi
// jobs are homogeneous (every rank runs the same architecture).
package datatype

import "unsafe"

// Elem is the set of basic element types: fixed-size numbers and bool, any
// named type whose underlying type is one of them, and the value-index
// Pairs of MinLoc and MaxLoc. int, uint and uintptr are 8 bytes on the
// 64-bit platforms gompi runs on.
type Elem interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128 | ~bool |
		Pair[float64, int] | Pair[float64, int32] | Pair[float32, int] | Pair[float32, int32] |
		Pair[int, int] | Pair[int32, int32] | Pair[int64, int] | Pair[int64, int32]
}

// Size returns the size of one element of T in bytes.
func Size[T Elem]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// Bytes views s as bytes without copying: the result shares s's memory, and
// writing to it writes to s. A nil or empty s gives an empty slice.
func Bytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*Size[T]())
}

// Count converts a length in bytes to a number of elements of T. ok is false
// when n is not a whole number of elements.
func Count[T Elem](n int) (count int, ok bool) {
	sz := Size[T]()
	return n / sz, n%sz == 0
}
