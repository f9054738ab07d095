package datatype

import (
	"errors"
	"math"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

type celsius float64

func TestPredefinedOps(t *testing.T) {
	in := []int32{5, -3, 0, 7}
	cases := []struct {
		op   *Op
		want []int32
	}{
		{Sum, []int32{7, 1, 0, 10}},
		{Prod, []int32{10, -12, 0, 21}},
		{Min, []int32{2, -3, 0, 3}},
		{Max, []int32{5, 4, 0, 7}},
		{LAnd, []int32{1, 1, 0, 1}},
		{LOr, []int32{1, 1, 0, 1}},
		{LXor, []int32{0, 0, 0, 0}},
		{BAnd, []int32{5 & 2, -3 & 4, 0, 7 & 3}},
		{BOr, []int32{5 | 2, -3 | 4, 0, 7 | 3}},
		{BXor, []int32{5 ^ 2, -3 ^ 4, 0, 7 ^ 3}},
	}
	for _, c := range cases {
		io := []int32{2, 4, 0, 3}
		if err := Apply(c.op, in, io); err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		for i := range io {
			if io[i] != c.want[i] {
				t.Errorf("%s: got %v, want %v", c.op, io, c.want)
				break
			}
		}
	}
}

func TestNamedAndFloatTypes(t *testing.T) {
	io := []celsius{1.5, -2}
	if err := Apply(Max, []celsius{3, -5}, io); err != nil {
		t.Fatal(err)
	}
	if io[0] != 3 || io[1] != -2 {
		t.Errorf("max of named floats: %v", io)
	}
	c := []complex128{1 + 1i}
	if err := Apply(Prod, []complex128{2i}, c); err != nil || c[0] != 2i*(1+1i) {
		t.Errorf("complex prod: %v %v", c, err)
	}
	b := []bool{true, false, true}
	if err := Apply(LXor, []bool{true, true, false}, b); err != nil || b[0] || !b[1] || !b[2] {
		t.Errorf("bool lxor: %v %v", b, err)
	}
}

func TestLocOps(t *testing.T) {
	in := []Pair[float64, int]{{1, 3}, {2, 0}, {math.Inf(1), 4}}
	io := []Pair[float64, int]{{1, 1}, {1, 9}, {5, 2}}
	if err := Apply(MinLoc, in, io); err != nil {
		t.Fatal(err)
	}
	want := []Pair[float64, int]{{1, 1}, {1, 9}, {5, 2}}
	for i := range io {
		if io[i] != want[i] {
			t.Fatalf("minloc: got %v, want %v", io, want)
		}
	}
	io2 := []Pair[int32, int32]{{4, 7}, {4, 2}}
	if err := Apply(MaxLoc, []Pair[int32, int32]{{4, 3}, {1, 0}}, io2); err != nil {
		t.Fatal(err)
	}
	if io2[0] != (Pair[int32, int32]{4, 3}) || io2[1] != (Pair[int32, int32]{4, 2}) {
		t.Errorf("maxloc ties to the smaller index: %v", io2)
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
// its tail, gives what one element at a time gives.
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
			in, io, want := make([]int64, n), make([]int64, n), make([]int64, n)
			for i := range in {
				in[i], io[i] = int64(i*7%11-5), int64(i*5%13-6)
				want[i] = o.one(in[i], io[i])
			}
			k(in, io)
			for i := range io {
				if io[i] != want[i] {
					t.Fatalf("%s over %d elements: element %d is %d, want %d", o.op.Name(), n, i, io[i], want[i])
				}
			}
		}
	}
}
