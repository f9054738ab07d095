package datatype

import (
	"bytes"
	"testing"
)

// TestCopyCached: the same bytes and count as the builtin copy, at lengths
// around the piece size, with either buffer the shorter, and for
// overlapping buffers in both directions (memmove's semantics).
func TestCopyCached(t *testing.T) {
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + i/251)
		}
		return b
	}
	for _, n := range []int{0, 1, 4095, CachedPiece - 1, CachedPiece, CachedPiece + 1, 2*CachedPiece + 3, 3 << 20} {
		for _, short := range []int{0, 1, 5000} {
			src := fill(n)
			dst, want := make([]byte, max(n-short, 0)), make([]byte, max(n-short, 0))
			if got, exp := CopyCached(dst, src), copy(want, src); got != exp || !bytes.Equal(dst, want) {
				t.Fatalf("len %d into %d: copied %d (want %d), bytes equal %v", n, len(dst), got, exp, bytes.Equal(dst, want))
			}
			dst, want = make([]byte, n+short), make([]byte, n+short)
			if got, exp := CopyCached(dst, src), copy(want, src); got != exp || !bytes.Equal(dst, want) {
				t.Fatalf("len %d into %d: copied %d (want %d), bytes equal %v", n, len(dst), got, exp, bytes.Equal(dst, want))
			}
		}
	}
	for _, shift := range []int{1, 4096, CachedPiece + 8} {
		n := 3 << 20
		for _, forward := range []bool{true, false} {
			buf, ref := fill(n+shift), fill(n+shift)
			var got int
			if forward {
				got = CopyCached(buf[shift:], buf[:n])
				copy(ref[shift:], ref[:n])
			} else {
				got = CopyCached(buf[:n], buf[shift:])
				copy(ref[:n], ref[shift:])
			}
			if got != n || !bytes.Equal(buf, ref) {
				t.Fatalf("overlap by %d (dst after src %v): copied %d of %d, bytes equal %v", shift, forward, got, n, bytes.Equal(buf, ref))
			}
		}
	}
}

// BenchmarkCopyThenSum: a 1 MiB copy and a sum over its destination, as an
// allreduce's first copy and first combine; builtin against CopyCached.
// The builtin's non-temporal stores send the sum to memory for every line.
func BenchmarkCopyThenSum(b *testing.B) {
	src, dst, in := make([]byte, 1<<20), make([]byte, 1<<20), make([]byte, 1<<20)
	sum, err := ReducerFor[float64](Sum)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		copy func(dst, src []byte) int
	}{{"builtin", func(d, s []byte) int { return copy(d, s) }}, {"cached", CopyCached}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(1 << 20)
			for b.Loop() {
				c.copy(dst, src)
				sum.Apply(in, dst)
			}
		})
	}
}
