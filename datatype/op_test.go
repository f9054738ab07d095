package datatype

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

type celsius float64

// Each case's expected result differs from its starting inout in every
// element, so that an op that writes nothing, or only some elements, fails.
// Every predefined op is commutative: the operands swapped give the same.
func TestPredefinedOps(t *testing.T) {
	cases := []struct {
		op           *Op
		in, io, want []int32
	}{
		{Sum, []int32{5, -3, 6, 7}, []int32{2, 4, -9, 3}, []int32{7, 1, -3, 10}},
		{Prod, []int32{5, -3, 6, 7}, []int32{2, 4, -9, 3}, []int32{10, -12, -54, 21}},
		{Min, []int32{1, -3, -9, 2}, []int32{2, 4, -6, 3}, []int32{1, -3, -9, 2}},
		{Max, []int32{5, 4, 0, 7}, []int32{2, -4, -6, 3}, []int32{5, 4, 0, 7}},
		{LAnd, []int32{5, 0, -3, 7}, []int32{2, 4, 9, -1}, []int32{1, 0, 1, 1}},
		{LOr, []int32{0, 5, -2, 7}, []int32{2, 0, -4, 3}, []int32{1, 1, 1, 1}},
		{LXor, []int32{5, 0, -3, 7}, []int32{2, 4, 0, -1}, []int32{0, 1, 1, 0}},
		{BAnd, []int32{5, -3, 12, 7}, []int32{3, 6, 10, 9}, []int32{5 & 3, -3 & 6, 12 & 10, 7 & 9}},
		{BOr, []int32{5, -3, 12, 7}, []int32{3, 6, 10, 9}, []int32{5 | 3, -3 | 6, 12 | 10, 7 | 9}},
		{BXor, []int32{5, -3, 12, 7}, []int32{3, 6, 10, 9}, []int32{5 ^ 3, -3 ^ 6, 12 ^ 10, 7 ^ 9}},
	}
	for _, c := range cases {
		for i := range c.io {
			if c.want[i] == c.io[i] {
				t.Fatalf("%s: element %d: the expected %d is the starting value: the case cannot catch an op that writes nothing", c.op, i, c.want[i])
			}
		}
		for _, order := range [][2][]int32{{c.in, c.io}, {c.io, c.in}} {
			in, io := order[0], append([]int32(nil), order[1]...)
			if err := Apply(c.op, in, io); err != nil {
				t.Fatalf("%s: %v", c.op, err)
			}
			if !slices.Equal(io, c.want) {
				t.Errorf("%s of %v into %v: got %v, want %v", c.op, in, order[1], io, c.want)
			}
		}
	}
	// The logical ops' whole truth table, zero and non-zero both ways.
	for _, a := range []int32{0, 3} {
		for _, b := range []int32{0, -2} {
			for _, l := range []struct {
				op *Op
				f  func(x, y bool) bool
			}{{LAnd, func(x, y bool) bool { return x && y }}, {LOr, func(x, y bool) bool { return x || y }}, {LXor, func(x, y bool) bool { return x != y }}} {
				io := []int32{b}
				if err := Apply(l.op, []int32{a}, io); err != nil {
					t.Fatal(err)
				}
				want := int32(0)
				if l.f(a != 0, b != 0) {
					want = 1
				}
				if io[0] != want {
					t.Errorf("%d %s %d = %d, want %d", a, l.op, b, io[0], want)
				}
			}
		}
	}
}

func TestNamedAndFloatTypes(t *testing.T) {
	io := []celsius{1.5, -2}
	if err := Apply(Max, []celsius{3, -1}, io); err != nil {
		t.Fatal(err)
	}
	if io[0] != 3 || io[1] != -1 {
		t.Errorf("max of named floats: %v, want [3 -1]", io)
	}
	c := []complex128{1 + 1i}
	if err := Apply(Prod, []complex128{2i}, c); err != nil || c[0] != 2i*(1+1i) {
		t.Errorf("complex prod: %v %v", c, err)
	}
	b := []bool{true, false}
	if err := Apply(LXor, []bool{true, true}, b); err != nil || b[0] || !b[1] {
		t.Errorf("bool lxor: %v %v, want [false true]", b, err)
	}
}

// MinLoc and MaxLoc keep the smaller (larger) value with its index, the
// smaller index on ties. Each element is applied both ways round, and its
// two operands differ, so that one of the two ways must write the other
// operand: a MinLoc that writes nothing fails, as does one that ignores
// the index on ties or always takes the later index.
func TestLocOps(t *testing.T) {
	type f64 = Pair[float64, int]
	type i32 = Pair[int32, int32]
	type locCase[P comparable] struct {
		op         *Op
		a, b, want []P
	}
	floats := []locCase[f64]{
		{MinLoc, []f64{{1, 3}, {2, 5}, {math.Inf(1), 4}, {-0.5, 9}, {7, 0}},
			[]f64{{2, 0}, {2, 1}, {5, 2}, {-0.25, 8}, {7, 6}},
			[]f64{{1, 3}, {2, 1}, {5, 2}, {-0.5, 9}, {7, 0}}},
		{MaxLoc, []f64{{1, 3}, {2, 5}, {math.Inf(1), 4}, {-0.5, 9}, {7, 0}},
			[]f64{{2, 0}, {2, 1}, {5, 2}, {-0.25, 8}, {7, 6}},
			[]f64{{2, 0}, {2, 1}, {math.Inf(1), 4}, {-0.25, 8}, {7, 0}}},
	}
	ints := []locCase[i32]{
		{MinLoc, []i32{{4, 3}, {1, 0}, {-7, 1}, {-8, 9}}, []i32{{4, 7}, {4, 2}, {-8, 0}, {-8, 2}},
			[]i32{{4, 3}, {1, 0}, {-8, 0}, {-8, 2}}},
		{MaxLoc, []i32{{4, 3}, {1, 0}, {-7, 1}, {-8, 9}}, []i32{{4, 7}, {4, 2}, {-8, 0}, {-8, 2}},
			[]i32{{4, 3}, {4, 2}, {-7, 1}, {-8, 2}}},
	}
	for _, c := range floats {
		runLoc(t, c.op, c.a, c.b, c.want)
	}
	for _, c := range ints {
		runLoc(t, c.op, c.a, c.b, c.want)
	}
}

// runLoc applies op to a into b and to b into a: both give want.
func runLoc[P Elem](t *testing.T, op *Op, a, b, want []P) {
	t.Helper()
	for i := range a {
		if a[i] == b[i] {
			t.Fatalf("%s: element %d: equal operands cannot show that the op writes", op, i)
		}
	}
	for _, order := range [][2][]P{{a, b}, {b, a}} {
		io := append([]P(nil), order[1]...)
		if err := Apply(op, order[0], io); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(io, want) {
			t.Errorf("%s of %v into %v: got %v, want %v", op, order[0], order[1], io, want)
		}
	}
}

func TestOpsThatDoNotApply(t *testing.T) {
	checks := []error{
		CheckOp[bool](Sum),
		CheckOp[float64](BAnd),
		CheckOp[complex64](Max),
		CheckOp[int](MinLoc),
		CheckOp[Pair[float64, int]](Sum),
		CheckOp[float32](NewOp("f64", func(in, io []float64) {}, true)),
		CheckOp[int](nil),
	}
	for i, err := range checks {
		if !errors.Is(err, mpierr.ErrOp) {
			t.Errorf("check %d: %v, want ErrOp", i, err)
		}
	}
	if err := CheckOp[bool](LAnd); err != nil {
		t.Errorf("land on bool: %v", err)
	}
	if err := Apply(Sum, []int{1}, []int{1, 2}); !errors.Is(err, mpierr.ErrCount) {
		t.Errorf("mismatched lengths: %v", err)
	}
}

func TestUserOpAndReducer(t *testing.T) {
	// Non-commutative: keep the left operand's first element (rank order).
	first := NewOp("first", func(in, io []int64) {
		for i := range io {
			io[i] = in[i]
		}
	}, false)
	if first.Commutative() || first.Predefined() || first.Name() != "first" {
		t.Fatalf("user op: %v %v %v", first.Commutative(), first.Predefined(), first.Name())
	}
	r, err := ReducerFor[int64](first)
	if err != nil {
		t.Fatal(err)
	}
	a, b := []int64{1, 2}, []int64{3, 4}
	r.Apply(Bytes(a), Bytes(b))
	if b[0] != 1 || b[1] != 2 || r.Size != 8 {
		t.Errorf("reducer: %v size %d", b, r.Size)
	}
	rs, err := ReducerFor[uint16](Sum)
	if err != nil {
		t.Fatal(err)
	}
	x, y := []uint16{0xffff, 1}, []uint16{1, 1}
	rs.Apply(Bytes(x), Bytes(y))
	if y[0] != 0 || y[1] != 2 {
		t.Errorf("uint16 sum wraps: %v", y)
	}
	rs.Apply(nil, nil) // empty buffers are fine
}

// The arithmetic kernels go eight elements at a time: every length, with
// its tail, gives what one element at a time gives, both ways round. No
// element is the same in both operands, so one of the two ways changes each
// element: a kernel that skips some (the tail) fails.
func TestArithEveryLength(t *testing.T) {
	ops := []struct {
		op  *Op
		one func(a, b int64) int64
	}{
		{Sum, func(a, b int64) int64 { return a + b }},
		{Prod, func(a, b int64) int64 { return a * b }},
		{Min, func(a, b int64) int64 { return min(a, b) }},
		{Max, func(a, b int64) int64 { return max(a, b) }},
	}
	for _, o := range ops {
		k, err := kernel[int64](o.op)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= 27; n++ {
			a, b := make([]int64, n), make([]int64, n)
			for i := range a {
				a[i] = int64(i*7%11 - 5)
				b[i] = a[i] + int64(i%3+1)*int64(i%2*2-1) // never a[i]
			}
			changed := make([]bool, n)
			for _, order := range [][2][]int64{{a, b}, {b, a}} {
				in, io := order[0], append([]int64(nil), order[1]...)
				k(in, io)
				for i := range io {
					if want := o.one(in[i], order[1][i]); io[i] != want {
						t.Fatalf("%s over %d elements: element %d is %d, want %d", o.op.Name(), n, i, io[i], want)
					}
					changed[i] = changed[i] || io[i] != order[1][i]
				}
			}
			if i := slices.Index(changed, false); i >= 0 {
				t.Fatalf("%s over %d elements: element %d is left as it was both ways round: the case cannot catch a kernel that skips it", o.op.Name(), n, i)
			}
		}
	}
}
