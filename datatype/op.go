package datatype

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gompi/gompi/mpierr"
)

// Pair is a value with an index, the element of MinLoc and MaxLoc (MPI's
// MPI_DOUBLE_INT, MPI_2INT and friends). The instantiations Elem lists are
// the ones typed calls accept.
type Pair[V Real, I Integer] struct {
	Value V
	Index I
}

// Integer is the set of integer element types.
type Integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr
}

// Real is the set of ordered numeric element types: integers and floats.
type Real interface {
	Integer | ~float32 | ~float64
}

type number interface {
	Real | ~complex64 | ~complex128
}

// Op is a reduction operation: a predefined one (Sum, Prod, Min, Max, LAnd,
// LOr, LXor, BAnd, BOr, BXor, MinLoc, MaxLoc) or a user function made with
// NewOp. Reductions combine the contributions in rank order: with a
// non-commutative op the result is x0 op x1 op … op x(n-1). Ops are
// immutable and safe to share between goroutines and instances.
type Op struct {
	name    string
	code    opCode
	commute bool
	// user is the function of an op made by NewOp, as a
	// func(in, inout []T), and userType its T.
	user     any
	userType reflect.Type
}

type opCode uint8

const (
	opUser opCode = iota
	opSum
	opProd
	opMin
	opMax
	opLAnd
	opLOr
	opLXor
	opBAnd
	opBOr
	opBXor
	opMinLoc
	opMaxLoc
)

// The predefined reduction operations, with MPI's meaning:
//
//   - Sum, Prod: integers, floats and complex numbers.
//   - Min, Max: integers and floats.
//   - LAnd, LOr, LXor (logical): integers (zero is false) and bool.
//   - BAnd, BOr, BXor (bitwise): integers.
//   - MinLoc, MaxLoc: Pairs; the smaller (larger) value with its index, the
//     smaller index on ties.
var (
	Sum    = &Op{name: "sum", code: opSum, commute: true}
	Prod   = &Op{name: "prod", code: opProd, commute: true}
	Min    = &Op{name: "min", code: opMin, commute: true}
	Max    = &Op{name: "max", code: opMax, commute: true}
	LAnd   = &Op{name: "land", code: opLAnd, commute: true}
	LOr    = &Op{name: "lor", code: opLOr, commute: true}
	LXor   = &Op{name: "lxor", code: opLXor, commute: true}
	BAnd   = &Op{name: "band", code: opBAnd, commute: true}
	BOr    = &Op{name: "bor", code: opBOr, commute: true}
	BXor   = &Op{name: "bxor", code: opBXor, commute: true}
	MinLoc = &Op{name: "minloc", code: opMinLoc, commute: true}
	MaxLoc = &Op{name: "maxloc", code: opMaxLoc, commute: true}
)

// NewOp makes a reduction operation from a function over elements of T
// (MPI_Op_create). f combines in into inout element by element: inout[i] =
// in[i] op inout[i], where in holds the contributions of lower ranks. It
// must not keep either slice. commutative tells the algorithms whether they
// may combine in any order; when false they keep rank order.
func NewOp[T Elem](name string, f func(in, inout []T), commutative bool) *Op {
	if f == nil {
		panic("datatype.NewOp: nil function")
	}
	if name == "" {
		name = "user"
	}
	return &Op{name: name, code: opUser, commute: commutative, user: f, userType: reflect.TypeFor[T]()}
}

// Name is the op's name ("sum", or the name given to NewOp).
func (o *Op) Name() string {
	if o == nil {
		return "<nil op>"
	}
	return o.name
}

func (o *Op) String() string { return o.Name() }

// Commutative reports whether the op may combine contributions in any
// order.
func (o *Op) Commutative() bool { return o != nil && o.commute }

// Predefined reports whether the op is one of the package's.
func (o *Op) Predefined() bool { return o != nil && o.code != opUser }

// Reducer is an op bound to an element type, working on bytes: what
// collective algorithms, which do not know the type, apply.
type Reducer struct {
	Op *Op
	// Size is the size of one element; every buffer passed to Apply holds
	// a whole number of elements.
	Size int
	// Apply combines in into inout: inout[i] = in[i] op inout[i], element by
	// element. The slices have equal lengths and do not overlap.
	Apply func(in, inout []byte)
}

// Commutative reports whether the reducer's op is commutative.
func (r Reducer) Commutative() bool { return r.Op.Commutative() }

// Same reports whether r and s are the same binding: the same op, element
// size and Apply closure (one binding, made once and kept, as package
// mpi's reducers are). Two bindings of one op to two types of one size
// have different closures, so they differ.
func (r Reducer) Same(s Reducer) bool {
	return r.Op == s.Op && r.Size == s.Size && closure(r.Apply) == closure(s.Apply)
}

// closure is f's closure pointer: its identity, which == cannot compare
// for funcs (a func value is a pointer to its closure).
func closure(f func(in, inout []byte)) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&f))
}

// ReducerFor binds op to T. An op that does not apply to T (Sum of bool,
// BAnd of float64, a user op made for another type) is an ErrOp error that
// names both.
func ReducerFor[T Elem](op *Op) (Reducer, error) {
	f, err := kernel[T](op)
	if err != nil {
		return Reducer{}, err
	}
	size := Size[T]()
	apply := func(in, inout []byte) {
		n := len(inout) / size
		if n == 0 {
			return
		}
		f(unsafe.Slice((*T)(unsafe.Pointer(&in[0])), n), unsafe.Slice((*T)(unsafe.Pointer(&inout[0])), n))
	}
	return Reducer{Op: op, Size: size, Apply: apply}, nil
}

// Apply combines in into inout with op: inout[i] = in[i] op inout[i].
func Apply[T Elem](op *Op, in, inout []T) error {
	if len(in) != len(inout) {
		return mpierr.Errorf(mpierr.ErrCount, "datatype: %s of %d elements into %d", op.Name(), len(in), len(inout))
	}
	f, err := kernel[T](op)
	if err != nil {
		return err
	}
	f(in, inout)
	return nil
}

// CheckOp reports whether op applies to T, as an ErrOp error when it does
// not.
func CheckOp[T Elem](op *Op) error {
	_, err := kernel[T](op)
	return err
}

// kernel returns the function that applies op to slices of T.
func kernel[T Elem](op *Op) (func(in, inout []T), error) {
	t := reflect.TypeFor[T]()
	if op == nil {
		return nil, mpierr.Errorf(mpierr.ErrOp, "datatype: nil reduction op")
	}
	if op.code == opUser {
		f, ok := op.user.(func(in, inout []T))
		if !ok {
			return nil, mpierr.Errorf(mpierr.ErrOp, "datatype: op %q was made for %v, not %v", op.name, op.userType, t)
		}
		return f, nil
	}
	bad := func() (func(in, inout []T), error) {
		return nil, mpierr.Errorf(mpierr.ErrOp, "datatype: op %s does not apply to %v: %s", op.name, t, applies[op.code])
	}
	if t.Kind() == reflect.Struct {
		if op.code != opMinLoc && op.code != opMaxLoc {
			return bad()
		}
		return pairKernel[T](op.code == opMinLoc)
	}
	if op.code == opMinLoc || op.code == opMaxLoc {
		return bad()
	}
	// The element's memory is that of its underlying basic type: apply the
	// kernel of that type to the same memory.
	var g any
	switch t.Kind() {
	case reflect.Int8:
		g = intKernel[int8](op.code)
	case reflect.Int16:
		g = intKernel[int16](op.code)
	case reflect.Int32:
		g = intKernel[int32](op.code)
	case reflect.Int64:
		g = intKernel[int64](op.code)
	case reflect.Int:
		g = intKernel[int](op.code)
	case reflect.Uint8:
		g = intKernel[uint8](op.code)
	case reflect.Uint16:
		g = intKernel[uint16](op.code)
	case reflect.Uint32:
		g = intKernel[uint32](op.code)
	case reflect.Uint64:
		g = intKernel[uint64](op.code)
	case reflect.Uint:
		g = intKernel[uint](op.code)
	case reflect.Uintptr:
		g = intKernel[uintptr](op.code)
	case reflect.Float32:
		g = floatKernel[float32](op.code)
	case reflect.Float64:
		g = floatKernel[float64](op.code)
	case reflect.Complex64:
		g = complexKernel[complex64](op.code)
	case reflect.Complex128:
		g = complexKernel[complex128](op.code)
	case reflect.Bool:
		g = boolKernel(op.code)
	}
	if g == nil {
		return bad()
	}
	return retype[T](g), nil
}

// applies says, per predefined op, the types it takes.
var applies = map[opCode]string{
	opSum: "it takes integers, floats and complex numbers", opProd: "it takes integers, floats and complex numbers",
	opMin: "it takes integers and floats", opMax: "it takes integers and floats",
	opLAnd: "it takes integers and bool", opLOr: "it takes integers and bool", opLXor: "it takes integers and bool",
	opBAnd: "it takes integers", opBOr: "it takes integers", opBXor: "it takes integers",
	opMinLoc: "it takes Pair elements", opMaxLoc: "it takes Pair elements",
}

// retype turns a kernel over the underlying type U (given as any) into one
// over T, which has U's memory layout.
func retype[T Elem](g any) func(in, inout []T) {
	switch k := g.(type) {
	case func(in, inout []int8):
		return viaKernel[T](k)
	case func(in, inout []int16):
		return viaKernel[T](k)
	case func(in, inout []int32):
		return viaKernel[T](k)
	case func(in, inout []int64):
		return viaKernel[T](k)
	case func(in, inout []int):
		return viaKernel[T](k)
	case func(in, inout []uint8):
		return viaKernel[T](k)
	case func(in, inout []uint16):
		return viaKernel[T](k)
	case func(in, inout []uint32):
		return viaKernel[T](k)
	case func(in, inout []uint64):
		return viaKernel[T](k)
	case func(in, inout []uint):
		return viaKernel[T](k)
	case func(in, inout []uintptr):
		return viaKernel[T](k)
	case func(in, inout []float32):
		return viaKernel[T](k)
	case func(in, inout []float64):
		return viaKernel[T](k)
	case func(in, inout []complex64):
		return viaKernel[T](k)
	case func(in, inout []complex128):
		return viaKernel[T](k)
	case func(in, inout []bool):
		return viaKernel[T](k)
	}
	panic(fmt.Sprintf("datatype: no kernel of type %T", g))
}

func viaKernel[T, U any](k func(in, inout []U)) func(in, inout []T) {
	return func(in, inout []T) {
		if len(inout) == 0 {
			return
		}
		k(unsafe.Slice((*U)(unsafe.Pointer(unsafe.SliceData(in))), len(in)),
			unsafe.Slice((*U)(unsafe.Pointer(unsafe.SliceData(inout))), len(inout)))
	}
}

func intKernel[E Integer](code opCode) any {
	switch code {
	case opSum, opProd, opMin, opMax:
		if k := vectorKernel[E](code); k != nil {
			return k
		}
		return arith[E](code)
	case opLAnd:
		return func(in, io []E) {
			for i := range io {
				io[i] = b2i[E](in[i] != 0 && io[i] != 0)
			}
		}
	case opLOr:
		return func(in, io []E) {
			for i := range io {
				io[i] = b2i[E](in[i] != 0 || io[i] != 0)
			}
		}
	case opLXor:
		return func(in, io []E) {
			for i := range io {
				io[i] = b2i[E]((in[i] != 0) != (io[i] != 0))
			}
		}
	case opBAnd:
		return func(in, io []E) {
			for i := range io {
				io[i] &= in[i]
			}
		}
	case opBOr:
		return func(in, io []E) {
			for i := range io {
				io[i] |= in[i]
			}
		}
	case opBXor:
		return func(in, io []E) {
			for i := range io {
				io[i] ^= in[i]
			}
		}
	}
	return nil
}

func b2i[E Integer](b bool) E {
	if b {
		return 1
	}
	return 0
}

func floatKernel[E ~float32 | ~float64](code opCode) any {
	switch code {
	case opSum, opProd, opMin, opMax:
		if k := vectorKernel[E](code); k != nil {
			return k
		}
		return arith[E](code)
	}
	return nil
}

// arith is Sum, Prod, Min or Max over an ordered type. The loops go eight
// elements at a time over slices the compiler knows are long enough: no
// bounds check per element, and independent operations the processor
// overlaps (a 2-rank 1 MiB float64 Allreduce: 148 -> 135 µs).
func arith[E Real](code opCode) func(in, io []E) {
	switch code {
	case opSum:
		return func(in, io []E) {
			in = in[:len(io)]
			i := 0
			for ; i+8 <= len(io); i += 8 {
				a, b := in[i:i+8:i+8], io[i:i+8:i+8]
				b[0], b[1], b[2], b[3] = a[0]+b[0], a[1]+b[1], a[2]+b[2], a[3]+b[3]
				b[4], b[5], b[6], b[7] = a[4]+b[4], a[5]+b[5], a[6]+b[6], a[7]+b[7]
			}
			for ; i < len(io); i++ {
				io[i] = in[i] + io[i]
			}
		}
	case opProd:
		return func(in, io []E) {
			in = in[:len(io)]
			i := 0
			for ; i+8 <= len(io); i += 8 {
				a, b := in[i:i+8:i+8], io[i:i+8:i+8]
				b[0], b[1], b[2], b[3] = a[0]*b[0], a[1]*b[1], a[2]*b[2], a[3]*b[3]
				b[4], b[5], b[6], b[7] = a[4]*b[4], a[5]*b[5], a[6]*b[6], a[7]*b[7]
			}
			for ; i < len(io); i++ {
				io[i] = in[i] * io[i]
			}
		}
	case opMin:
		return func(in, io []E) {
			in = in[:len(io)]
			i := 0
			for ; i+8 <= len(io); i += 8 {
				a, b := in[i:i+8:i+8], io[i:i+8:i+8]
				b[0], b[1], b[2], b[3] = min(a[0], b[0]), min(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
				b[4], b[5], b[6], b[7] = min(a[4], b[4]), min(a[5], b[5]), min(a[6], b[6]), min(a[7], b[7])
			}
			for ; i < len(io); i++ {
				io[i] = min(in[i], io[i])
			}
		}
	default:
		return func(in, io []E) {
			in = in[:len(io)]
			i := 0
			for ; i+8 <= len(io); i += 8 {
				a, b := in[i:i+8:i+8], io[i:i+8:i+8]
				b[0], b[1], b[2], b[3] = max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])
				b[4], b[5], b[6], b[7] = max(a[4], b[4]), max(a[5], b[5]), max(a[6], b[6]), max(a[7], b[7])
			}
			for ; i < len(io); i++ {
				io[i] = max(in[i], io[i])
			}
		}
	}
}

func complexKernel[E ~complex64 | ~complex128](code opCode) any {
	switch code {
	case opSum:
		return func(in, io []E) {
			for i := range io {
				io[i] = in[i] + io[i]
			}
		}
	case opProd:
		return func(in, io []E) {
			for i := range io {
				io[i] = in[i] * io[i]
			}
		}
	}
	return nil
}

func boolKernel(code opCode) any {
	switch code {
	case opLAnd:
		return func(in, io []bool) {
			for i := range io {
				io[i] = in[i] && io[i]
			}
		}
	case opLOr:
		return func(in, io []bool) {
			for i := range io {
				io[i] = in[i] || io[i]
			}
		}
	case opLXor:
		return func(in, io []bool) {
			for i := range io {
				io[i] = in[i] != io[i]
			}
		}
	}
	return nil
}

// pairKernel is MinLoc or MaxLoc over the Pair instantiation T.
func pairKernel[T Elem](isMin bool) (func(in, inout []T), error) {
	var z T
	var g any
	switch any(z).(type) {
	case Pair[float64, int]:
		g = locKernel[float64, int](isMin)
	case Pair[float64, int32]:
		g = locKernel[float64, int32](isMin)
	case Pair[float32, int]:
		g = locKernel[float32, int](isMin)
	case Pair[float32, int32]:
		g = locKernel[float32, int32](isMin)
	case Pair[int, int]:
		g = locKernel[int, int](isMin)
	case Pair[int32, int32]:
		g = locKernel[int32, int32](isMin)
	case Pair[int64, int]:
		g = locKernel[int64, int](isMin)
	case Pair[int64, int32]:
		g = locKernel[int64, int32](isMin)
	}
	f, ok := g.(func(in, inout []T))
	if !ok {
		return nil, mpierr.Errorf(mpierr.ErrOp, "datatype: minloc/maxloc do not apply to %T", z)
	}
	return f, nil
}

func locKernel[V Real, I Integer](isMin bool) func(in, inout []Pair[V, I]) {
	return func(in, io []Pair[V, I]) {
		for i := range io {
			a, b := in[i], io[i]
			better := a.Value > b.Value
			if isMin {
				better = a.Value < b.Value
			}
			if better || (a.Value == b.Value && a.Index < b.Index) {
				io[i] = a
			}
		}
	}
}
