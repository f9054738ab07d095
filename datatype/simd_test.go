package datatype

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// The vector kernels against one IEEE operation (or wrapping integer
// operation) per element: every length up to past two of the wide passes,
// both ends unaligned, values that overflow, round, underflow, and give
// NaN and signed zeros. Elements past the slice are guards that must stay
// as they were.
func TestVectorKernelsMatchOneElementAtATime(t *testing.T) {
	if !haveVector {
		t.Log("no vector kernels on this processor: checking the Go loops alone")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	floats := func() float64 {
		switch rng.IntN(10) {
		case 0:
			return math.NaN()
		case 1:
			return math.Copysign(0, float64(rng.IntN(2)*2-1))
		case 2:
			return math.Inf(rng.IntN(2)*2 - 1)
		case 3:
			return math.SmallestNonzeroFloat64 * float64(rng.IntN(100))
		case 4:
			return math.MaxFloat64 / float64(1+rng.IntN(3))
		}
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
	}
	checkVector(t, "float64", Sum, floats, func(a, b float64) float64 { return a + b })
	checkVector(t, "float64", Prod, floats, func(a, b float64) float64 { return a * b })
	checkVector(t, "float32", Sum, func() float32 { return float32(floats()) }, func(a, b float32) float32 { return a + b })
	checkVector(t, "float32", Prod, func() float32 { return float32(floats()) }, func(a, b float32) float32 { return a * b })
	checkVector(t, "celsius", Sum, func() celsius { return celsius(floats()) }, func(a, b celsius) celsius { return a + b })
	checkVector(t, "int64", Sum, func() int64 { return int64(rng.Uint64()) }, func(a, b int64) int64 { return a + b })
	checkVector(t, "uint64", Sum, rng.Uint64, func(a, b uint64) uint64 { return a + b })
	checkVector(t, "int", Sum, func() int { return int(rng.Uint64()) }, func(a, b int) int { return a + b })
	checkVector(t, "int32", Sum, func() int32 { return int32(rng.Uint32()) }, func(a, b int32) int32 { return a + b })
	checkVector(t, "uint32", Sum, rng.Uint32, func(a, b uint32) uint32 { return a + b })
	// Prod of integers has no vector kernel; the Go loop still serves it.
	checkVector(t, "int64", Prod, func() int64 { return int64(rng.Uint64()) }, func(a, b int64) int64 { return a * b })
}

func checkVector[E Real](t *testing.T, name string, op *Op, gen func() E, one func(a, b E) E) {
	t.Helper()
	k, err := kernel[E](op)
	if err != nil {
		t.Fatal(err)
	}
	const guard = 3
	for n := 0; n <= 2*vectorMin+67; n++ {
		for shift := 0; shift < 2; shift++ {
			inAll, ioAll := make([]E, shift+n+guard), make([]E, 1-shift+n+guard)
			for i := range inAll {
				inAll[i] = gen()
			}
			for i := range ioAll {
				ioAll[i] = gen()
			}
			in, io := inAll[shift:shift+n], ioAll[1-shift:1-shift+n]
			before := append([]E(nil), ioAll...)
			k(in, io)
			for i := range io {
				want := one(before[1-shift+i], in[i])
				if !sameValue(io[i], want) {
					t.Fatalf("%s %s over %d elements (in at +%d, io at +%d): element %d is %v, want %v (%v and %v)",
						name, op.Name(), n, shift, 1-shift, i, io[i], want, before[1-shift+i], in[i])
				}
			}
			for i := 1 - shift + n; i < len(ioAll); i++ {
				if !sameValue(ioAll[i], before[i]) {
					t.Fatalf("%s %s over %d elements: wrote past the end, at %d", name, op.Name(), n, i-(1-shift))
				}
			}
		}
	}
}

// sameValue is bit equality, except that any NaN equals any NaN: MPI does
// not say which NaN a reduction keeps, and neither do Go's operators.
func sameValue[E Real](a, b E) bool {
	switch unsafe.Sizeof(a) {
	case 8:
		x, y := *(*uint64)(unsafe.Pointer(&a)), *(*uint64)(unsafe.Pointer(&b))
		if isFloat[E]() && math.IsNaN(math.Float64frombits(x)) {
			return math.IsNaN(math.Float64frombits(y))
		}
		return x == y
	case 4:
		x, y := *(*uint32)(unsafe.Pointer(&a)), *(*uint32)(unsafe.Pointer(&b))
		if isFloat[E]() {
			f, g := math.Float32frombits(x), math.Float32frombits(y)
			if f != f {
				return g != g
			}
		}
		return x == y
	}
	return a == b
}

func isFloat[E Real]() bool {
	var one E = 1
	return one/2 != 0
}

// Sum of float64, as Allreduce reduces it: the vector kernel against the
// Go loop, at the sizes where reductions cost (64 KiB, 512 KiB, 1 MiB).
func BenchmarkSumFloat64(b *testing.B) {
	for _, n := range []int{8 << 10, 64 << 10, 128 << 10} {
		in, io := make([]float64, n), make([]float64, n)
		for _, k := range []struct {
			name string
			f    func(in, io []float64)
		}{{"vector", vectorKernel[float64](opSum)}, {"go", arith[float64](opSum)}} {
			if k.f == nil {
				continue
			}
			b.Run(k.name+"/"+byteSize(8*n), func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				for b.Loop() {
					k.f(in, io)
				}
			})
		}
	}
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return itoa(n>>20) + "MiB"
	}
	return itoa(n>>10) + "KiB"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
