package group

import (
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

// decodeTriplets reads triplets from fuzz bytes. Each value is one byte
// (a small signed number, so that valid triplets are common) or, when the
// byte's top bit is set, the next 8 bytes as an int64 (extremes).
func decodeTriplets(data []byte) [][3]int {
	var out [][3]int
	next := func() (int, bool) {
		if len(data) == 0 {
			return 0, false
		}
		b := data[0]
		data = data[1:]
		if b&0x80 == 0 {
			return int(int8(b<<1) >> 1), true
		}
		if len(data) < 8 {
			return 0, false
		}
		v := int(int64(binary.LittleEndian.Uint64(data)))
		data = data[8:]
		return v, true
	}
	for {
		var t [3]int
		for i := range t {
			v, ok := next()
			if !ok {
				return out
			}
			t[i] = v
		}
		out = append(out, t)
	}
}

// naiveExpand is the MPI definition, walked one rank at a time in exact
// arithmetic: the reference ExpandRanges must agree with.
func naiveExpand(size int, ranges [][3]int) ([]int, mpierr.Class) {
	out := []int{}
	seen := map[int64]bool{}
	for _, t := range ranges {
		first, last, stride := big.NewInt(int64(t[0])), big.NewInt(int64(t[1])), big.NewInt(int64(t[2]))
		switch {
		case stride.Sign() == 0,
			first.Cmp(last) > 0 && stride.Sign() > 0,
			first.Cmp(last) < 0 && stride.Sign() < 0:
			return nil, mpierr.ErrArg
		}
		for r := new(big.Int).Set(first); ; r.Add(r, stride) {
			if stride.Sign() > 0 && r.Cmp(last) > 0 || stride.Sign() < 0 && r.Cmp(last) < 0 {
				break
			}
			if !r.IsInt64() || r.Int64() < 0 || r.Int64() >= int64(size) || seen[r.Int64()] {
				return nil, mpierr.ErrRank
			}
			seen[r.Int64()] = true
			out = append(out, int(r.Int64()))
		}
	}
	return out, mpierr.Success
}

func FuzzExpandRanges(f *testing.F) {
	enc := func(vals ...int64) []byte {
		var b []byte
		for _, v := range vals {
			b = append(b, 0x80)
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return b
	}
	f.Add(uint16(5), []byte{0, 4, 1})
	f.Add(uint16(5), []byte{4, 0, 0x7f}) // stride -1
	f.Add(uint16(6), []byte{1, 5, 2, 4, 0, 0x7e})
	f.Add(uint16(5), []byte{0, 5, 2})
	f.Add(uint16(5), []byte{0, 5, 1})
	f.Add(uint16(5), []byte{0, 4, 0})
	f.Add(uint16(0), []byte{0, 0, 1})
	f.Add(uint16(5), enc(1, math.MaxInt64, math.MaxInt64))
	f.Add(uint16(5), enc(1, math.MinInt64, math.MinInt64))
	f.Add(uint16(5), enc(0, math.MinInt64, -1))
	f.Add(uint16(1000), enc(999, 0, -333))
	f.Fuzz(func(t *testing.T, sz uint16, data []byte) {
		// Sizes up to 2047 reach every branch; bigger ones only slow each
		// run (the reference walks rank by rank in big.Int arithmetic).
		size := int(sz % 2048)
		ranges := decodeTriplets(data)
		got, err := ExpandRanges(size, ranges)
		want, class := naiveExpand(size, ranges)
		if class != mpierr.Success {
			if err == nil {
				t.Fatalf("size %d %v: expanded to %v, want class %s", size, ranges, got, class.Name())
			}
			if mpierr.ClassOf(err) != class || !errors.Is(err, class) {
				t.Fatalf("size %d %v: error %q, want class %s", size, ranges, err, class.Name())
			}
			return
		}
		if err != nil {
			t.Fatalf("size %d %v: %v, want %v", size, ranges, err, want)
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("size %d %v: got %v, want %v", size, ranges, got, want)
		}
		// RangeIncl and RangeExcl go through the same expansion: check
		// their results against it on a world of that size.
		if size == 0 {
			return
		}
		o, w := worldOpsF(t, size)
		inc, err := o.RangeIncl(w, ranges)
		if err != nil || !slices.Equal(members(inc), want) && len(want) > 0 {
			t.Fatalf("RangeIncl %v = %v, %v; want %v", ranges, members(inc), err, want)
		}
		exc, err := o.RangeExcl(w, ranges)
		if err != nil || exc.Size() != size-len(want) {
			t.Fatalf("RangeExcl %v: size %d, %v; want %d", ranges, exc.Size(), err, size-len(want))
		}
	})
}

func worldOpsF(t *testing.T, size int) (Ops, *Group) {
	o := Ops{Module: denseMod{}}
	w, err := o.World(size)
	if err != nil {
		t.Fatal(err)
	}
	return o, w
}
