package colltest

import (
	"bytes"
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
)

// Options choose what Conformance runs.
type Options struct {
	// Sizes are the communicator sizes; nil means 1 to 17 and 65.
	Sizes []int
	// Counts are the element counts per block; nil means 0, 1, 5 and 129.
	Counts []int
	// Commutative restricts reductions to commutative ops (for algorithms
	// that need them); otherwise a non-commutative op checks rank order too.
	Commutative bool
	// NoInPlace skips the in-place forms.
	NoInPlace bool
	// AllRoots runs rooted operations with every root; otherwise with 0,
	// the last rank and one in the middle.
	AllRoots bool
}

func (o *Options) sizes() []int {
	if o.Sizes != nil {
		return o.Sizes
	}
	s := []int{65}
	for n := 1; n <= 17; n++ {
		s = append(s, n)
	}
	return s
}

func (o *Options) counts() []int {
	if o.Counts != nil {
		return o.Counts
	}
	return []int{0, 1, 5, 129}
}

func (o *Options) roots(n int) []int {
	if o.AllRoots || n <= 3 {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	return []int{0, n / 2, n - 1}
}

// Affine is a non-commutative, associative op on uint64: each element is
// the map x -> m*x + c (mod 2^32), m in the high half, c in the low; the
// op composes them, the left operand applied first.
var Affine = datatype.NewOp("affine", func(in, io []uint64) {
	for i := range io {
		m1, c1 := in[i]>>32, in[i]&0xffffffff
		m2, c2 := io[i]>>32, io[i]&0xffffffff
		io[i] = (m1*m2&0xffffffff)<<32 | (m2*c1+c2)&0xffffffff
	}
}, false)

// opCase is a reduction to check: an op and how to compare results.
type opCase struct {
	name  string
	op    *datatype.Op
	float bool
}

func (o *Options) opCases() []opCase {
	cs := []opCase{{"sum", datatype.Sum, false}, {"fsum", datatype.Sum, true}}
	if !o.Commutative {
		cs = append(cs, opCase{"affine", Affine, false})
	}
	return cs
}

// input is rank r's i-th element of case c.
func input(c opCase, r, i int) uint64 {
	if c.float {
		return math.Float64bits(float64(r+1)*0.1 + float64(i)*1e-3)
	}
	if c.op == Affine {
		return uint64(2*r+3)<<32 | uint64(7*r+i+1)
	}
	return uint64(r*1000003 + i*7 + 1)
}

func reducer(c opCase) datatype.Reducer {
	var r datatype.Reducer
	var err error
	if c.float {
		r, err = datatype.ReducerFor[float64](c.op)
	} else {
		r, err = datatype.ReducerFor[uint64](c.op)
	}
	if err != nil {
		panic(err)
	}
	return r
}

// fold is the reference reduction of ranks lo..hi-1's inputs, in rank
// order, count elements each.
func fold(c opCase, lo, hi, count int) []byte {
	r := reducer(c)
	acc := make([]uint64, count)
	for i := range acc {
		acc[i] = input(c, hi-1, i)
	}
	for rank := hi - 2; rank >= lo; rank-- {
		in := make([]uint64, count)
		for i := range in {
			in[i] = input(c, rank, i)
		}
		r.Apply(datatype.Bytes(in), datatype.Bytes(acc))
	}
	return datatype.Bytes(acc)
}

func inputBytes(c opCase, r, count int) []byte {
	v := make([]uint64, count)
	for i := range v {
		v[i] = input(c, r, i)
	}
	return datatype.Bytes(v)
}

// same compares results: exactly, or within a relative 1e-9 for floats
// (algorithms add in different orders).
func same(c opCase, got, want []byte) bool {
	if !c.float {
		return bytes.Equal(got, want)
	}
	if len(got) != len(want) {
		return false
	}
	for i := 0; i+8 <= len(got); i += 8 {
		g := math.Float64frombits(leU64(got[i:]))
		w := math.Float64frombits(leU64(want[i:]))
		if math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			return false
		}
	}
	return true
}

func leU64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// pattern is a non-reduction input: rank r's block, n bytes, for seed.
func pattern(r, n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r*31 + i*7 + seed*13 + 1)
	}
	return b
}

// vcounts are per-rank element counts for the v variants: uneven, some
// zero.
func vcounts(n, count int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = ((i*7 + 3) % 4) * count / 2
	}
	return c
}

// layout places blocks of counts (bytes) with a gap of 8 bytes before each,
// and returns the displacements and the total length.
func layout(counts []int) (displs []int, total int) {
	displs = make([]int, len(counts))
	for i, c := range counts {
		total += 8
		displs[i] = total
		total += c
	}
	return displs, total
}

const elem = 8 // the suite's element size (uint64, float64)

// Conformance runs op with f over the options' sizes, counts, roots and
// reductions, in-place forms included, and fails t at the first rank whose
// result differs from the reference, or whose algorithm leaves messages
// behind.
func Conformance(t *testing.T, op coll.Op, f coll.Func, o Options) {
	t.Helper()
	slot := f
	f = func(c coll.Comm, a *coll.Args) error { a.Op = op; return slot(c, a) }
	for _, n := range o.sizes() {
		for _, count := range o.counts() {
			if op == coll.Barrier && count > 0 {
				continue
			}
			if err := conform(op, f, n, count, &o); err != nil {
				t.Fatalf("%s, %d ranks, %d elements: %v", op, n, count, err)
			}
		}
	}
}

// conform runs every case of op at one size and count.
func conform(op coll.Op, f coll.Func, n, count int, o *Options) error {
	// run runs one case on a fresh world. fn reports whether its rank
	// compared a result; checkers is how many ranks have one to compare
	// (the root of a reduce, every rank but 0 of an exscan): a case that
	// returned before comparing fails instead of passing unseen.
	run := func(checkers int, fn func(c coll.Comm) (bool, error)) error {
		w := NewWorld(n, false)
		var checked atomic.Int32
		err := w.Run(func(c coll.Comm) error {
			ok, err := fn(c)
			if ok && err == nil {
				checked.Add(1)
			}
			return err
		})
		if err != nil {
			return err
		}
		if k := int(checked.Load()); k != checkers {
			return fmt.Errorf("colltest: %d ranks compared their result, want %d", k, checkers)
		}
		return w.Leftover()
	}
	inPlaces := []bool{false}
	if !o.NoInPlace && op != coll.Barrier && op != coll.Bcast {
		inPlaces = append(inPlaces, true)
	}
	block := count * elem
	switch op {
	case coll.Barrier:
		var entered atomic.Int32
		return run(n, func(c coll.Comm) (bool, error) {
			entered.Add(1)
			if err := f(c, &coll.Args{}); err != nil {
				return false, err
			}
			if k := entered.Load(); int(k) != n {
				return true, fmt.Errorf("left the barrier when %d of %d ranks had entered", k, n)
			}
			return true, nil
		})
	case coll.Bcast:
		for _, root := range o.roots(n) {
			err := run(n, func(c coll.Comm) (bool, error) {
				buf := make([]byte, block)
				if c.Rank() == root {
					copy(buf, pattern(root, block, 1))
				}
				if err := f(c, &coll.Args{Recv: buf, Root: root}); err != nil {
					return false, err
				}
				return true, want(buf, pattern(root, block, 1), "the root's data")
			})
			if err != nil {
				return fmt.Errorf("root %d: %w", root, err)
			}
		}
	case coll.Reduce, coll.Allreduce, coll.Scan, coll.Exscan:
		for _, oc := range o.opCases() {
			for _, ip := range inPlaces {
				roots := []int{0}
				if op == coll.Reduce {
					roots = o.roots(n)
				}
				checkers := n
				switch op {
				case coll.Reduce:
					checkers = 1
				case coll.Exscan:
					checkers = n - 1
				}
				for _, root := range roots {
					err := run(checkers, func(c coll.Comm) (bool, error) {
						me := c.Rank()
						a := &coll.Args{Send: inputBytes(oc, me, count), Recv: make([]byte, block), Root: root, Reducer: reducer(oc)}
						if ip && (op != coll.Reduce || me == root) {
							copy(a.Recv, a.Send)
							a.Send, a.InPlace = nil, true
						}
						if err := f(c, a); err != nil {
							return false, err
						}
						var ref []byte
						switch {
						case op == coll.Reduce && me != root:
							return false, nil
						case op == coll.Reduce || op == coll.Allreduce:
							ref = fold(oc, 0, n, count)
						case op == coll.Scan:
							ref = fold(oc, 0, me+1, count)
						case me == 0:
							return false, nil // exscan: rank 0's result is undefined
						default:
							ref = fold(oc, 0, me, count)
						}
						if !same(oc, a.Recv, ref) {
							return true, fmt.Errorf("%s result differs from the reference", oc.name)
						}
						return true, nil
					})
					if err != nil {
						return fmt.Errorf("%s, in place %v, root %d: %w", oc.name, ip, root, err)
					}
				}
			}
		}
	case coll.ReduceScatterBlock, coll.ReduceScatter:
		for _, oc := range o.opCases() {
			for _, ip := range inPlaces {
				counts := make([]int, n)
				for i := range counts {
					counts[i] = block
				}
				if op == coll.ReduceScatter {
					for i, k := range vcounts(n, count) {
						counts[i] = k * elem
					}
				}
				displs, total := packed(counts)
				err := run(n, func(c coll.Comm) (bool, error) {
					me := c.Rank()
					a := &coll.Args{Send: inputBytes(oc, me, total/elem), Recv: make([]byte, counts[me]), Reducer: reducer(oc)}
					if op == coll.ReduceScatter {
						a.Counts = counts
					}
					if ip {
						a.Recv = append([]byte(nil), a.Send...)
						a.Send, a.InPlace = nil, true
					}
					if err := f(c, a); err != nil {
						return false, err
					}
					ref := fold(oc, 0, n, total/elem)[displs[me] : displs[me]+counts[me]]
					if !same(oc, a.Recv[:counts[me]], ref) {
						return true, fmt.Errorf("%s: block %d differs from the reference", oc.name, me)
					}
					return true, nil
				})
				if err != nil {
					return fmt.Errorf("%s, in place %v: %w", oc.name, ip, err)
				}
			}
		}
	case coll.Gather, coll.Gatherv, coll.Allgather, coll.Allgatherv:
		v := op == coll.Gatherv || op == coll.Allgatherv
		all := op == coll.Allgather || op == coll.Allgatherv
		roots := []int{0}
		if !all {
			roots = o.roots(n)
		}
		counts := make([]int, n)
		for i := range counts {
			counts[i] = block
		}
		if v {
			for i, k := range vcounts(n, count) {
				counts[i] = k * elem
			}
		}
		displs, total := packed(counts)
		if v {
			displs, total = layout(counts)
		}
		checkers := 1
		if all {
			checkers = n
		}
		for _, ip := range inPlaces {
			for _, root := range roots {
				err := run(checkers, func(c coll.Comm) (bool, error) {
					me := c.Rank()
					recv := bytes.Repeat([]byte{0xee}, total)
					a := &coll.Args{Send: pattern(me, counts[me], 2), Root: root}
					if all || me == root {
						a.Recv = recv
					}
					if v {
						a.Counts, a.Displs = counts, displs
					}
					if ip && (all || me == root) {
						copy(recv[displs[me]:], a.Send)
						a.Send, a.InPlace = nil, true
					}
					if err := f(c, a); err != nil {
						return false, err
					}
					if !all && me != root {
						return false, nil
					}
					ref := bytes.Repeat([]byte{0xee}, total)
					for r := 0; r < n; r++ {
						copy(ref[displs[r]:], pattern(r, counts[r], 2))
					}
					return true, want(recv, ref, "the gathered blocks")
				})
				if err != nil {
					return fmt.Errorf("in place %v, root %d: %w", ip, root, err)
				}
			}
		}
	case coll.Scatter, coll.Scatterv:
		counts := make([]int, n)
		for i := range counts {
			counts[i] = block
		}
		displs, total := packed(counts)
		if op == coll.Scatterv {
			for i, k := range vcounts(n, count) {
				counts[i] = k * elem
			}
			displs, total = layout(counts)
		}
		src := pattern(99, total, 3)
		for _, ip := range inPlaces {
			for _, root := range o.roots(n) {
				err := run(n, func(c coll.Comm) (bool, error) {
					me := c.Rank()
					a := &coll.Args{Recv: make([]byte, counts[me]), Root: root}
					if op == coll.Scatterv {
						a.Counts, a.Displs = counts, displs
					}
					if me == root {
						a.Send = append([]byte(nil), src...)
						if ip {
							a.Recv, a.InPlace = nil, true
						}
					}
					if err := f(c, a); err != nil {
						return false, err
					}
					if me == root && ip {
						return true, want(a.Send, src, "the root's buffer")
					}
					return true, want(a.Recv, src[displs[me]:displs[me]+counts[me]], "the scattered block")
				})
				if err != nil {
					return fmt.Errorf("in place %v, root %d: %w", ip, root, err)
				}
			}
		}
	case coll.Alltoall, coll.Alltoallv:
		for _, ip := range inPlaces {
			// sc[i][j]: bytes rank i sends rank j. Alltoallv's are uneven,
			// some zero; in place, rank i sends j as many as it receives
			// from j (MPI's in-place alltoallv exchanges recvcounts[j]
			// both ways), so the matrix is symmetric.
			sc := make([][]int, n)
			for i := range sc {
				sc[i] = make([]int, n)
				for j := range sc[i] {
					switch {
					case op == coll.Alltoall:
						sc[i][j] = block
					case ip:
						sc[i][j] = ((i + j) % 3) * count * elem / 2
					default:
						sc[i][j] = ((i + 2*j) % 3) * count * elem / 2
					}
				}
			}
			err := run(n, func(c coll.Comm) (bool, error) {
				me := c.Rank()
				scounts, rcounts := sc[me], make([]int, n)
				for j := range rcounts {
					rcounts[j] = sc[j][me]
				}
				sdispls, stotal := packed(scounts)
				rdispls, rtotal := packed(rcounts)
				if op == coll.Alltoallv {
					sdispls, stotal = layout(scounts)
					rdispls, rtotal = layout(rcounts)
				}
				send := bytes.Repeat([]byte{0xdd}, stotal)
				for j := 0; j < n; j++ {
					copy(send[sdispls[j]:], pattern(me*n+j, scounts[j], 4))
				}
				recv := bytes.Repeat([]byte{0xee}, rtotal)
				a := &coll.Args{Send: send, Recv: recv}
				if op == coll.Alltoallv {
					a.SendCounts, a.SendDispls, a.Counts, a.Displs = scounts, sdispls, rcounts, rdispls
				}
				if ip {
					if op == coll.Alltoallv {
						// In place: the input is laid out as the output.
						for j := 0; j < n; j++ {
							copy(recv[rdispls[j]:], pattern(me*n+j, rcounts[j], 4))
						}
						a.SendCounts, a.SendDispls = nil, nil
					} else {
						copy(recv, send)
					}
					a.Send, a.InPlace = nil, true
				}
				if err := f(c, a); err != nil {
					return false, err
				}
				ref := bytes.Repeat([]byte{0xee}, rtotal)
				for j := 0; j < n; j++ {
					copy(ref[rdispls[j]:], pattern(j*n+me, rcounts[j], 4))
				}
				return true, want(recv, ref, "the exchanged blocks")
			})
			if err != nil {
				return fmt.Errorf("in place %v: %w", ip, err)
			}
		}
	default:
		return fmt.Errorf("colltest: no conformance check for %s", op)
	}
	return nil
}

// packed places blocks of counts back to back.
func packed(counts []int) (displs []int, total int) {
	displs = make([]int, len(counts))
	for i, c := range counts {
		displs[i] = total
		total += c
	}
	return displs, total
}

func want(got, ref []byte, what string) error {
	if bytes.Equal(got, ref) {
		return nil
	}
	for i := range got {
		if i >= len(ref) || got[i] != ref[i] {
			return fmt.Errorf("%s differ at byte %d of %d (got %#x, want %#x)", what, i, len(ref), got[i], ref[min(i, len(ref)-1)])
		}
	}
	return fmt.Errorf("%s: %d bytes, want %d", what, len(got), len(ref))
}
