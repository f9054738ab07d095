// Package collcheck is the collectives suite: checks that every rank of a
// communicator runs together, each comparing the results of package mpi's
// collectives with a plain computation from the inputs, which every rank
// can make alone (inputs are functions of the rank). The tests of package
// mpi run it with goroutine ranks under every algorithm, and a test program
// runs it in processes under mpirun.
package collcheck

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
)

// Options tune the suite.
type Options struct {
	// Counts are the element counts of the data checks; nil means 0, 1,
	// 7 and 1000.
	Counts []int
	// AllRoots runs rooted collectives from every root; otherwise from 0,
	// the middle rank and the last.
	AllRoots bool
	// Only names the checks to run (Checks' names); nil runs them all.
	Only []string
}

func (o *Options) counts() []int {
	if o.Counts != nil {
		return o.Counts
	}
	return []int{0, 1, 7, 1000}
}

func (o *Options) roots(n int) []int {
	if o.AllRoots || n <= 3 {
		r := make([]int, n)
		for i := range r {
			r[i] = i
		}
		return r
	}
	return []int{0, n / 2, n - 1}
}

// Check is one collective check.
type Check struct {
	Name string
	Run  func(c *mpi.Comm, o *Options) error
}

// Checks are the suite, in order.
var Checks = []Check{
	{"barrier", checkBarrier},
	{"bcast", checkBcast},
	{"reduce", checkReduce},
	{"allreduce", checkAllreduce},
	{"scan", checkScan},
	{"gather", checkGather},
	{"scatter", checkScatter},
	{"allgather", checkAllgather},
	{"alltoall", checkAlltoall},
	{"reducescatter", checkReduceScatter},
	{"errors", checkErrors},
}

// Run runs the checks on c; the error names the check.
func Run(c *mpi.Comm, o Options) error {
	for _, ch := range Checks {
		if o.Only != nil && !slices.Contains(o.Only, ch.Name) {
			continue
		}
		if err := ch.Run(c, &o); err != nil {
			return fmt.Errorf("collcheck %s on %s (%d ranks), rank %d: %w", ch.Name, c.Name(), c.Size(), c.Rank(), err)
		}
	}
	return nil
}

// The inputs: element i of rank r.
func xi(r, i int) int64     { return int64(r*1000003 + i*7 + 1) }
func xf(r, i int) float64   { return float64(r+1)*0.25 + float64(i)*1e-3 }
func xb(r, i int) bool      { return (r+i)%3 != 0 }
func xa(r, i int) uint64    { return uint64(2*r+3)<<32 | uint64(7*r+i+1) }
func xs(r, j, i int) int64  { return int64(r*100000 + j*1000 + i) } // block j of rank r
func ints(r, n int) []int64 { return gen(n, func(i int) int64 { return xi(r, i) }) }

func gen[T any](n int, f func(i int) T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

// affine is non-commutative: element (m, c) is x -> m*x + c mod 2^32,
// composed left first. It checks that results keep rank order.
var affine = mpi.NewOp("affine", func(in, io []uint64) {
	for i := range io {
		m1, c1 := in[i]>>32, in[i]&0xffffffff
		m2, c2 := io[i]>>32, io[i]&0xffffffff
		io[i] = (m1*m2&0xffffffff)<<32 | (m2*c1+c2)&0xffffffff
	}
}, false)

func composeAffine(lo, hi, i int) uint64 {
	acc := xa(lo, i)
	for r := lo + 1; r < hi; r++ {
		m1, c1 := acc>>32, acc&0xffffffff
		v := xa(r, i)
		m2, c2 := v>>32, v&0xffffffff
		acc = (m1*m2&0xffffffff)<<32 | (m2*c1+c2)&0xffffffff
	}
	return acc
}

func sumInts(lo, hi, i int) int64 {
	var s int64
	for r := lo; r < hi; r++ {
		s += xi(r, i)
	}
	return s
}

func equal[T comparable](got, want []T, what string) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}

func near(got, want []float64, what string) error {
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-9*math.Max(1, math.Abs(want[i])) {
			return fmt.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}

// checkBarrier: rank 0 enters late; nobody may leave before it entered.
// Every rank's exit time, gathered, is compared with rank 0's entry.
func checkBarrier(c *mpi.Comm, o *Options) error {
	if err := c.Barrier(); err != nil {
		return err
	}
	var entry int64
	if c.Rank() == 0 {
		time.Sleep(20 * time.Millisecond)
		entry = time.Now().UnixNano()
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	exit := time.Now().UnixNano()
	times := make([]int64, c.Size())
	if err := mpi.Allgather(c, []int64{exit}, times); err != nil {
		return err
	}
	in := []int64{entry}
	if err := mpi.Bcast(c, in, 0); err != nil {
		return err
	}
	for r, t := range times {
		if t < in[0] {
			return fmt.Errorf("rank %d left the barrier %v before rank 0 entered it", r, time.Duration(in[0]-t))
		}
	}
	return nil
}

func checkBcast(c *mpi.Comm, o *Options) error {
	for _, n := range append(o.counts(), 70000) {
		for _, root := range o.roots(c.Size()) {
			buf := make([]int64, n)
			if c.Rank() == root {
				buf = ints(root, n)
			}
			if err := mpi.Bcast(c, buf, root); err != nil {
				return err
			}
			if err := equal(buf, ints(root, n), fmt.Sprintf("bcast of %d from %d", n, root)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkReduce(c *mpi.Comm, o *Options) error {
	me, p := c.Rank(), c.Size()
	for _, n := range o.counts() {
		for _, root := range o.roots(p) {
			recv := make([]int64, n)
			if err := mpi.Reduce(c, ints(me, n), recv, mpi.Sum, root); err != nil {
				return err
			}
			if me == root {
				if err := equal(recv, gen(n, func(i int) int64 { return sumInts(0, p, i) }), "reduce sum"); err != nil {
					return err
				}
			}
			// Non-commutative, in place at the root.
			a := gen(n, func(i int) uint64 { return xa(me, i) })
			var out []uint64
			if me == root {
				out = a
			}
			if err := mpi.Reduce(c, a, out, affine, root); err != nil {
				return err
			}
			if me == root {
				if err := equal(out, gen(n, func(i int) uint64 { return composeAffine(0, p, i) }), "reduce of a non-commutative op, in place"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkAllreduce(c *mpi.Comm, o *Options) error {
	me, p := c.Rank(), c.Size()
	for _, n := range append(o.counts(), 40000) {
		recv := make([]int64, n)
		if err := mpi.Allreduce(c, ints(me, n), recv, mpi.Sum); err != nil {
			return err
		}
		if err := equal(recv, gen(n, func(i int) int64 { return sumInts(0, p, i) }), "allreduce sum"); err != nil {
			return err
		}
		f := gen(n, func(i int) float64 { return xf(me, i) })
		if err := mpi.Allreduce(c, f, f, mpi.Sum); err != nil { // in place
			return err
		}
		if err := near(f, gen(n, func(i int) float64 {
			s := 0.0
			for r := 0; r < p; r++ {
				s += xf(r, i)
			}
			return s
		}), "allreduce of floats in place"); err != nil {
			return err
		}
		a := gen(n, func(i int) uint64 { return xa(me, i) })
		if err := mpi.Allreduce(c, a, a, affine); err != nil {
			return err
		}
		if err := equal(a, gen(n, func(i int) uint64 { return composeAffine(0, p, i) }), "allreduce of a non-commutative op"); err != nil {
			return err
		}
	}
	// MinLoc on pairs, LAnd on bool, BXor on int32.
	loc := []mpi.Pair[float64, int]{{Value: float64((me*7)%p) - 0.5, Index: me}}
	if err := mpi.Allreduce(c, loc, loc, mpi.MinLoc); err != nil {
		return err
	}
	best := slices.MinFunc(gen(p, func(r int) mpi.Pair[float64, int] {
		return mpi.Pair[float64, int]{Value: float64((r*7)%p) - 0.5, Index: r}
	}),
		func(a, b mpi.Pair[float64, int]) int {
			if a.Value != b.Value {
				return map[bool]int{true: -1, false: 1}[a.Value < b.Value]
			}
			return a.Index - b.Index
		})
	if loc[0] != best {
		return fmt.Errorf("minloc: %+v, want %+v", loc[0], best)
	}
	bs := gen(9, func(i int) bool { return xb(me, i) })
	if err := mpi.Allreduce(c, bs, bs, mpi.LAnd); err != nil {
		return err
	}
	for i := range bs {
		want := true
		for r := 0; r < p; r++ {
			want = want && xb(r, i)
		}
		if bs[i] != want {
			return fmt.Errorf("land: element %d is %v", i, bs[i])
		}
	}
	return nil
}

func checkScan(c *mpi.Comm, o *Options) error {
	me := c.Rank()
	for _, n := range o.counts() {
		recv := make([]int64, n)
		if err := mpi.Scan(c, ints(me, n), recv, mpi.Sum); err != nil {
			return err
		}
		if err := equal(recv, gen(n, func(i int) int64 { return sumInts(0, me+1, i) }), "scan"); err != nil {
			return err
		}
		a := gen(n, func(i int) uint64 { return xa(me, i) })
		ex := make([]uint64, n)
		if err := mpi.Exscan(c, a, ex, affine); err != nil {
			return err
		}
		if me > 0 {
			if err := equal(ex, gen(n, func(i int) uint64 { return composeAffine(0, me, i) }), "exscan of a non-commutative op"); err != nil {
				return err
			}
		}
		if err := mpi.Scan(c, a, a, affine); err != nil { // in place
			return err
		}
		if err := equal(a, gen(n, func(i int) uint64 { return composeAffine(0, me+1, i) }), "scan in place"); err != nil {
			return err
		}
		// Exscan in place: rank 0's buffer is left as it was.
		e := gen(n, func(i int) uint64 { return xa(me, i) })
		if err := mpi.Exscan(c, e, e, affine); err != nil {
			return err
		}
		want := gen(n, func(i int) uint64 { return xa(0, i) })
		if me > 0 {
			want = gen(n, func(i int) uint64 { return composeAffine(0, me, i) })
		}
		if err := equal(e, want, "exscan in place"); err != nil {
			return err
		}
	}
	return nil
}

// vcounts are uneven per-rank counts, some zero.
func vcounts(p, n int) []int { return gen(p, func(r int) int { return ((r*7 + 3) % 4) * n / 2 }) }

// gapped lays blocks of counts out with a gap of 2 before each.
func gapped(counts []int) (displs []int, total int) {
	displs = make([]int, len(counts))
	for i, k := range counts {
		total += 2
		displs[i] = total
		total += k
	}
	return displs, total
}

func checkGather(c *mpi.Comm, o *Options) error {
	me, p := c.Rank(), c.Size()
	for _, n := range o.counts() {
		for _, root := range o.roots(p) {
			var recv []int64
			if me == root {
				recv = make([]int64, n*p)
			}
			if err := mpi.Gather(c, gen(n, func(i int) int64 { return xs(me, 0, i) }), recv, root); err != nil {
				return err
			}
			want := make([]int64, 0, n*p)
			for r := 0; r < p; r++ {
				want = append(want, gen(n, func(i int) int64 { return xs(r, 0, i) })...)
			}
			if me == root {
				if err := equal(recv, want, "gather"); err != nil {
					return err
				}
				// In place: the root's own block is already there.
				recv = make([]int64, n*p)
				copy(recv[root*n:], gen(n, func(i int) int64 { return xs(me, 0, i) }))
			}
			send := gen(n, func(i int) int64 { return xs(me, 0, i) })
			if me == root {
				send = recv[root*n : root*n+n]
			}
			if err := mpi.Gather(c, send, recv, root); err != nil {
				return err
			}
			if me == root {
				if err := equal(recv, want, "gather in place"); err != nil {
					return err
				}
			}
			// Gatherv, gaps untouched.
			counts := vcounts(p, n)
			displs, total := gapped(counts)
			if me == root {
				recv = slices.Repeat([]int64{-9}, total)
			}
			if err := mpi.Gatherv(c, gen(counts[me], func(i int) int64 { return xs(me, 1, i) }), recv, counts, displs, root); err != nil {
				return err
			}
			if me == root {
				wantv := slices.Repeat([]int64{-9}, total)
				for r := 0; r < p; r++ {
					copy(wantv[displs[r]:], gen(counts[r], func(i int) int64 { return xs(r, 1, i) }))
				}
				if err := equal(recv, wantv, "gatherv"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkScatter(c *mpi.Comm, o *Options) error {
	me, p := c.Rank(), c.Size()
	for _, n := range o.counts() {
		for _, root := range o.roots(p) {
			var send []int64
			if me == root {
				for r := 0; r < p; r++ {
					send = append(send, gen(n, func(i int) int64 { return xs(root, r, i) })...)
				}
			}
			recv := make([]int64, n)
			if err := mpi.Scatter(c, send, recv, root); err != nil {
				return err
			}
			if err := equal(recv, gen(n, func(i int) int64 { return xs(root, me, i) }), "scatter"); err != nil {
				return err
			}
			// In place: the root's own block stays in send.
			recv = make([]int64, n)
			if me == root {
				recv = send[root*n : root*n+n]
			}
			if err := mpi.Scatter(c, send, recv, root); err != nil {
				return err
			}
			if err := equal(recv, gen(n, func(i int) int64 { return xs(root, me, i) }), "scatter in place"); err != nil {
				return err
			}
			counts := vcounts(p, n)
			displs, total := gapped(counts)
			if me == root {
				send = gen(total, func(i int) int64 { return int64(i * 3) })
			}
			recv = make([]int64, counts[me])
			if me == root {
				recv = send[displs[root] : displs[root]+counts[root]] // in place
			}
			if err := mpi.Scatterv(c, send, counts, displs, recv, root); err != nil {
				return err
			}
			if err := equal(recv, gen(counts[me], func(i int) int64 { return int64((displs[me] + i) * 3) }), "scatterv"); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkAllgather(c *mpi.Comm, o *Options) error {
	me, p := c.Rank(), c.Size()
	for _, n := range append(o.counts(), 5000) {
		want := make([]int64, 0, n*p)
		for r := 0; r < p; r++ {
			want = append(want, gen(n, func(i int) int64 { return xs(r, 2, i) })...)
		}
		recv := make([]int64, n*p)
		if err := mpi.Allgather(c, gen(n, func(i int) int64 { return xs(me, 2, i) }), recv); err != nil {
			return err
		}
		if err := equal(recv, want, "allgather"); err != nil {
			return err
		}
		recv = make([]int64, n*p)
		copy(recv[me*n:], gen(n, func(i int) int64 { return xs(me, 2, i) }))
		if err := mpi.Allgather(c, recv[me*n:me*n+n], recv); err != nil { // in place
			return err
		}
		if err := equal(recv, want, "allgather in place"); err != nil {
			return err
		}
		counts := vcounts(p, n)
		displs, total := gapped(counts)
		recv = slices.Repeat([]int64{-9}, total)
		if err := mpi.Allgatherv(c, gen(counts[me], func(i int) int64 { return xs(me, 3, i) }), recv, counts, displs); err != nil {
			return err
		}
		wantv := slices.Repeat([]int64{-9}, total)
		for r := 0; r < p; r++ {
			copy(wantv[displs[r]:], gen(counts[r], func(i int) int64 { return xs(r, 3, i) }))
		}
		if err := equal(recv, wantv, "allgatherv"); err != nil {
			return err
		}
	}
	return nil
}

func checkAlltoall(c *mpi.Comm, o *Options) error {
	me, p := c.Rank(), c.Size()
	for _, n := range o.counts() {
		var send, want []int64
		for j := 0; j < p; j++ {
			send = append(send, gen(n, func(i int) int64 { return xs(me, j, i) })...)
			want = append(want, gen(n, func(i int) int64 { return xs(j, me, i) })...)
		}
		recv := make([]int64, n*p)
		if err := mpi.Alltoall(c, send, recv); err != nil {
			return err
		}
		if err := equal(recv, want, "alltoall"); err != nil {
			return err
		}
		if err := mpi.Alltoall(c, send, send); err != nil { // in place
			return err
		}
		if err := equal(send, want, "alltoall in place"); err != nil {
			return err
		}
		// Alltoallv: rank i sends ((i+2j)%3)*n/2 elements to rank j.
		sc := func(i, j int) int { return ((i + 2*j) % 3) * n / 2 }
		scounts := gen(p, func(j int) int { return sc(me, j) })
		rcounts := gen(p, func(j int) int { return sc(j, me) })
		sdispls, stotal := gapped(scounts)
		rdispls, rtotal := gapped(rcounts)
		sv := make([]int64, stotal)
		for j := 0; j < p; j++ {
			copy(sv[sdispls[j]:], gen(scounts[j], func(i int) int64 { return xs(me, j, i) }))
		}
		rv := slices.Repeat([]int64{-9}, rtotal)
		if err := mpi.Alltoallv(c, sv, scounts, sdispls, rv, rcounts, rdispls); err != nil {
			return err
		}
		wv := slices.Repeat([]int64{-9}, rtotal)
		for j := 0; j < p; j++ {
			copy(wv[rdispls[j]:], gen(rcounts[j], func(i int) int64 { return xs(j, me, i) }))
		}
		if err := equal(rv, wv, "alltoallv"); err != nil {
			return err
		}
		// In place: rank i sends rank j as many elements as it receives
		// from it (recvCounts both ways), so the counts are symmetric:
		// ((i+j)%3)*n/2, uneven, some zero, with gaps; the send counts are
		// ignored (nil).
		ic := func(i, j int) int { return ((i + j) % 3) * n / 2 }
		counts := gen(p, func(j int) int { return ic(me, j) })
		displs, total := gapped(counts)
		buf := slices.Repeat([]int64{-9}, total)
		for j := 0; j < p; j++ {
			copy(buf[displs[j]:], gen(counts[j], func(i int) int64 { return xs(me, j, i) }))
		}
		if err := mpi.Alltoallv(c, buf, nil, nil, buf, counts, displs); err != nil {
			return err
		}
		wip := slices.Repeat([]int64{-9}, total)
		for j := 0; j < p; j++ {
			copy(wip[displs[j]:], gen(counts[j], func(i int) int64 { return xs(j, me, i) }))
		}
		if err := equal(buf, wip, "alltoallv in place"); err != nil {
			return err
		}
	}
	return nil
}

func checkReduceScatter(c *mpi.Comm, o *Options) error {
	me, p := c.Rank(), c.Size()
	for _, n := range o.counts() {
		send := ints(me, n*p)
		recv := make([]int64, n)
		if err := mpi.ReduceScatterBlock(c, send, recv, mpi.Sum); err != nil {
			return err
		}
		if err := equal(recv, gen(n, func(i int) int64 { return sumInts(0, p, me*n+i) }), "reduce_scatter_block"); err != nil {
			return err
		}
		if err := mpi.ReduceScatterBlock(c, send, send[:n], mpi.Sum); err != nil { // in place
			return err
		}
		if err := equal(send[:n], gen(n, func(i int) int64 { return sumInts(0, p, me*n+i) }), "reduce_scatter_block in place"); err != nil {
			return err
		}
		counts := vcounts(p, n)
		total, before := 0, 0
		for r, k := range counts {
			if r == me {
				before = total
			}
			total += k
		}
		a := gen(total, func(i int) uint64 { return xa(me, i) })
		out := make([]uint64, counts[me])
		if err := mpi.ReduceScatter(c, a, out, counts, affine); err != nil {
			return err
		}
		if err := equal(out, gen(counts[me], func(i int) uint64 { return composeAffine(0, p, before+i) }), "reduce_scatter of a non-commutative op"); err != nil {
			return err
		}
	}
	return nil
}

// checkErrors: arguments every rank gets wrong alike fail on every rank,
// before any message, with their class; the communicator works after.
func checkErrors(c *mpi.Comm, o *Options) error {
	p := c.Size()
	cases := []struct {
		what  string
		class mpierr.Class
		err   error
	}{
		{"a root past the size", mpierr.ErrRoot, mpi.Bcast(c, []int{1}, p)},
		{"a negative root", mpierr.ErrRoot, mpi.Reduce(c, []int{1}, []int{0}, mpi.Sum, -1)},
		{"sum of bool", mpierr.ErrOp, mpi.Allreduce(c, []bool{true}, []bool{true}, mpi.Sum)},
		{"band of float64", mpierr.ErrOp, mpi.Allreduce(c, []float64{1}, []float64{1}, mpi.BAnd)},
		{"minloc of int", mpierr.ErrOp, mpi.Allreduce(c, []int{1}, []int{1}, mpi.MinLoc)},
		{"a nil op", mpierr.ErrOp, mpi.Allreduce(c, []int{1}, []int{1}, nil)},
		{"allreduce of 2 into 3", mpierr.ErrCount, mpi.Allreduce(c, []int{1, 2}, []int{0, 0, 0}, mpi.Sum)},
		{"allgather into the wrong size", mpierr.ErrCount, mpi.Allgather(c, []int{1}, make([]int, p+1))},
		{"allgatherv with a count per rank and one more", mpierr.ErrCount, mpi.Allgatherv(c, []int{1}, make([]int, p+1), make([]int, p+1), make([]int, p+1))},
		{"overlapping buffers", mpierr.ErrBuffer, func() error {
			b := make([]int, 4)
			return mpi.Allreduce(c, b[:2], b[1:3], mpi.Sum)
		}()},
	}
	if p > 1 {
		// Every length is a multiple of one.
		cases = append(cases, struct {
			what  string
			class mpierr.Class
			err   error
		}{"alltoall of a length not a multiple of the size", mpierr.ErrCount, mpi.Alltoall(c, make([]int, p+1), make([]int, p+1))})
	}
	var errs []error
	for _, cs := range cases {
		if !errors.Is(cs.err, cs.class) {
			errs = append(errs, fmt.Errorf("%s: %v, want class %s", cs.what, cs.err, cs.class.Name()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.Barrier()
}
