// Package collcheck is the collectives suite: checks that every rank of a
// communicator runs together, each comparing the results of package mpi's
// collectives with a plain computation from the inputs, which every rank
// can make alone (inputs are functions of the rank). The tests of package
// mpi run it with goroutine ranks under every algorithm, and a test program
// runs it in processes under mpirun. Each check calls the blocking,
// nonblocking or persistent forms of the collectives (Options.Mode), with
// the same expected results.
package collcheck

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
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
	// Mode says which forms of the collectives the checks call: the
	// expected results are the same.
	Mode Mode
	// InFlight is how many nonblocking or persistent collectives a check
	// starts before it completes them; 0 means 4.
	InFlight int
	// Runs is how many times a check starts each persistent collective,
	// with new inputs every time; 0 means 3.
	Runs int
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

func (o *Options) inFlight() int {
	if o.InFlight > 0 {
		return o.InFlight
	}
	return 4
}

func (o *Options) runs() int {
	if o.Runs > 0 {
		return o.Runs
	}
	return 3
}

// Check is one collective check.
type Check struct {
	Name string
	Run  func(x *exec) error
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

// Run runs the checks on c; the error names the check and the mode.
func Run(c *mpi.Comm, o Options) error {
	for _, ch := range Checks {
		if o.Only != nil && !slices.Contains(o.Only, ch.Name) {
			continue
		}
		x := newExec(c, &o, ch.Name)
		err := ch.Run(x)
		if err == nil {
			err = x.flush()
		}
		if err != nil {
			return fmt.Errorf("collcheck %s (%s) on %s (%d ranks), rank %d: %w", ch.Name, o.Mode, c.Name(), c.Size(), c.Rank(), err)
		}
	}
	return nil
}

// The inputs: element i of rank r. Run k of a persistent collective takes
// element i+shift(k) instead, so that every run's inputs and results
// differ from the last's.
func xi(r, i int) int64    { return int64(r*1000003 + i*7 + 1) }
func xf(r, i int) float64  { return float64(r+1)*0.25 + float64(i)*1e-3 }
func xb(r, i int) bool     { return (r+i)%3 != 0 }
func xa(r, i int) uint64   { return uint64(2*r+3)<<32 | uint64(7*r+i+1) }
func xs(r, j, i int) int64 { return int64(r*100000 + j*1000 + i) } // block j of rank r
func shift(run int) int    { return 101 * run }

func ints(r, n, k int) []int64 { return gen(n, func(i int) int64 { return xi(r, i+k) }) }

func gen[T any](n int, f func(i int) T) []T {
	s := make([]T, n)
	fill(s, f)
	return s
}

// fill writes f(i) into s[i]: a persistent collective's buffers are the
// same slices every run.
func fill[T any](s []T, f func(i int) T) {
	for i := range s {
		s[i] = f(i)
	}
}

// poison fills an output with v, so that a result not written shows.
func poison[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
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

func nothing(int) {}

// checkBarrier: rank 0 enters late; nobody may leave before it entered.
// Every rank's exit time, gathered, is compared with rank 0's entry. The
// barrier runs alone (nothing beside it synchronizes the ranks), waited
// for as soon as it starts.
func checkBarrier(x *exec) error {
	c := x.c
	runs := 1
	var req *mpi.Request
	if x.o.Mode == Persistent {
		var err error
		if req, err = c.BarrierInit(); err != nil {
			return err
		}
		runs = x.o.runs()
	}
	for run := 0; run < runs; run++ {
		if err := c.Barrier(); err != nil {
			return err
		}
		var entry int64
		if c.Rank() == 0 {
			time.Sleep(20 * time.Millisecond)
			entry = time.Now().UnixNano()
		}
		var err error
		switch x.o.Mode {
		case Nonblocking:
			var r *mpi.Request
			if r, err = c.Ibarrier(); err == nil {
				_, err = r.Wait()
			}
		case Persistent:
			if err = req.Start(); err == nil {
				_, err = req.Wait()
			}
		default:
			err = c.Barrier()
		}
		if err != nil {
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
				return fmt.Errorf("run %d: rank %d left the barrier %v before rank 0 entered it", run+1, r, time.Duration(in[0]-t))
			}
		}
	}
	if req != nil {
		return req.Free()
	}
	return nil
}

func checkBcast(x *exec) error {
	c, me := x.c, x.c.Rank()
	for _, n := range append(x.o.counts(), 70000) {
		for _, root := range x.o.roots(c.Size()) {
			what := fmt.Sprintf("bcast of %d from %d", n, root)
			buf := make([]int64, n)
			err := x.do(what, bcastF(c, buf, root), func(run int) {
				if me == root {
					fill(buf, func(i int) int64 { return xi(root, i+shift(run)) })
				} else {
					poison(buf, -9)
				}
			}, func(run int) error { return equal(buf, ints(root, n, shift(run)), what) })
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func checkReduce(x *exec) error {
	c, me, p := x.c, x.c.Rank(), x.c.Size()
	for _, n := range x.o.counts() {
		for _, root := range x.o.roots(p) {
			send, recv := make([]int64, n), make([]int64, n)
			err := x.do(fmt.Sprintf("reduce sum of %d to %d", n, root), reduceF(c, send, recv, mpi.Sum, root), func(run int) {
				fill(send, func(i int) int64 { return xi(me, i+shift(run)) })
				poison(recv, -9)
			}, func(run int) error {
				if me != root {
					return nil
				}
				return equal(recv, gen(n, func(i int) int64 { return sumInts(0, p, i+shift(run)) }), "reduce sum")
			})
			if err != nil {
				return err
			}
			// Non-commutative, in place at the root.
			a := make([]uint64, n)
			var out []uint64
			if me == root {
				out = a
			}
			err = x.do(fmt.Sprintf("reduce of %d to %d", n, root), reduceF(c, a, out, affine, root), func(run int) {
				fill(a, func(i int) uint64 { return xa(me, i+shift(run)) })
			}, func(run int) error {
				if me != root {
					return nil
				}
				return equal(out, gen(n, func(i int) uint64 { return composeAffine(0, p, i+shift(run)) }), "reduce of a non-commutative op, in place")
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func checkAllreduce(x *exec) error {
	c, me, p := x.c, x.c.Rank(), x.c.Size()
	for _, n := range append(x.o.counts(), 40000) {
		send, recv := make([]int64, n), make([]int64, n)
		err := x.do(fmt.Sprintf("allreduce sum of %d", n), allreduceF(c, send, recv, mpi.Sum), func(run int) {
			fill(send, func(i int) int64 { return xi(me, i+shift(run)) })
			poison(recv, -9)
		}, func(run int) error {
			return equal(recv, gen(n, func(i int) int64 { return sumInts(0, p, i+shift(run)) }), "allreduce sum")
		})
		if err != nil {
			return err
		}
		f := make([]float64, n)
		err = x.do(fmt.Sprintf("allreduce of %d floats", n), allreduceF(c, f, f, mpi.Sum), func(run int) { // in place
			fill(f, func(i int) float64 { return xf(me, i+shift(run)) })
		}, func(run int) error {
			return near(f, gen(n, func(i int) float64 {
				s := 0.0
				for r := 0; r < p; r++ {
					s += xf(r, i+shift(run))
				}
				return s
			}), "allreduce of floats in place")
		})
		if err != nil {
			return err
		}
		a := make([]uint64, n)
		err = x.do(fmt.Sprintf("allreduce of %d", n), allreduceF(c, a, a, affine), func(run int) {
			fill(a, func(i int) uint64 { return xa(me, i+shift(run)) })
		}, func(run int) error {
			return equal(a, gen(n, func(i int) uint64 { return composeAffine(0, p, i+shift(run)) }), "allreduce of a non-commutative op")
		})
		if err != nil {
			return err
		}
		in, out := make([]uint64, n), make([]uint64, n)
		err = x.do(fmt.Sprintf("allreduce of %d, not in place", n), allreduceF(c, in, out, affine), func(run int) {
			fill(in, func(i int) uint64 { return xa(me, i+shift(run)) })
			poison(out, 9)
		}, func(run int) error {
			return equal(out, gen(n, func(i int) uint64 { return composeAffine(0, p, i+shift(run)) }), "allreduce of a non-commutative op, not in place")
		})
		if err != nil {
			return err
		}
	}
	// MinLoc on pairs, LAnd on bool.
	value := func(r, run int) mpi.Pair[float64, int] {
		return mpi.Pair[float64, int]{Value: float64((r*7+run)%p) - 0.5, Index: r}
	}
	loc := make([]mpi.Pair[float64, int], 1)
	err := x.do("allreduce minloc", allreduceF(c, loc, loc, mpi.MinLoc), func(run int) { loc[0] = value(me, run) }, func(run int) error {
		best := slices.MinFunc(gen(p, func(r int) mpi.Pair[float64, int] { return value(r, run) }),
			func(a, b mpi.Pair[float64, int]) int {
				if a.Value != b.Value {
					return map[bool]int{true: -1, false: 1}[a.Value < b.Value]
				}
				return a.Index - b.Index
			})
		if loc[0] != best {
			return fmt.Errorf("minloc: %+v, want %+v", loc[0], best)
		}
		return nil
	})
	if err != nil {
		return err
	}
	bs := make([]bool, 9)
	return x.do("allreduce land", allreduceF(c, bs, bs, mpi.LAnd), func(run int) {
		fill(bs, func(i int) bool { return xb(me, i+shift(run)) })
	}, func(run int) error {
		for i := range bs {
			want := true
			for r := 0; r < p; r++ {
				want = want && xb(r, i+shift(run))
			}
			if bs[i] != want {
				return fmt.Errorf("land: element %d is %v", i, bs[i])
			}
		}
		return nil
	})
}

func checkScan(x *exec) error {
	c, me := x.c, x.c.Rank()
	for _, n := range x.o.counts() {
		send, recv := make([]int64, n), make([]int64, n)
		err := x.do(fmt.Sprintf("scan of %d", n), scanF(c, send, recv, mpi.Sum), func(run int) {
			fill(send, func(i int) int64 { return xi(me, i+shift(run)) })
			poison(recv, -9)
		}, func(run int) error {
			return equal(recv, gen(n, func(i int) int64 { return sumInts(0, me+1, i+shift(run)) }), "scan")
		})
		if err != nil {
			return err
		}
		a, ex := make([]uint64, n), make([]uint64, n)
		err = x.do(fmt.Sprintf("exscan of %d", n), exscanF(c, a, ex, affine), func(run int) {
			fill(a, func(i int) uint64 { return xa(me, i+shift(run)) })
			poison(ex, 9)
		}, func(run int) error {
			if me == 0 {
				return nil
			}
			return equal(ex, gen(n, func(i int) uint64 { return composeAffine(0, me, i+shift(run)) }), "exscan of a non-commutative op")
		})
		if err != nil {
			return err
		}
		s := make([]uint64, n)
		err = x.do(fmt.Sprintf("scan of %d in place", n), scanF(c, s, s, affine), func(run int) {
			fill(s, func(i int) uint64 { return xa(me, i+shift(run)) })
		}, func(run int) error {
			return equal(s, gen(n, func(i int) uint64 { return composeAffine(0, me+1, i+shift(run)) }), "scan in place")
		})
		if err != nil {
			return err
		}
		// Exscan in place: rank 0's buffer is left as it was.
		e := make([]uint64, n)
		err = x.do(fmt.Sprintf("exscan of %d in place", n), exscanF(c, e, e, affine), func(run int) {
			fill(e, func(i int) uint64 { return xa(me, i+shift(run)) })
		}, func(run int) error {
			want := gen(n, func(i int) uint64 { return xa(0, i+shift(run)) })
			if me > 0 {
				want = gen(n, func(i int) uint64 { return composeAffine(0, me, i+shift(run)) })
			}
			return equal(e, want, "exscan in place")
		})
		if err != nil {
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

func checkGather(x *exec) error {
	c, me, p := x.c, x.c.Rank(), x.c.Size()
	for _, n := range x.o.counts() {
		for _, root := range x.o.roots(p) {
			want := func(run int) []int64 {
				w := make([]int64, 0, n*p)
				for r := 0; r < p; r++ {
					w = append(w, gen(n, func(i int) int64 { return xs(r, 0, i+shift(run)) })...)
				}
				return w
			}
			mine := func(run int) func(i int) int64 { return func(i int) int64 { return xs(me, 0, i+shift(run)) } }
			send := make([]int64, n)
			var recv []int64
			if me == root {
				recv = make([]int64, n*p)
			}
			err := x.do(fmt.Sprintf("gather of %d to %d", n, root), gatherF(c, send, recv, root), func(run int) {
				fill(send, mine(run))
				poison(recv, -9)
			}, func(run int) error {
				if me != root {
					return nil
				}
				return equal(recv, want(run), "gather")
			})
			if err != nil {
				return err
			}
			// In place: the root's own block is already there.
			send = make([]int64, n)
			recv = nil
			if me == root {
				recv = make([]int64, n*p)
				send = recv[root*n : root*n+n]
			}
			err = x.do(fmt.Sprintf("gather of %d to %d in place", n, root), gatherF(c, send, recv, root), func(run int) {
				poison(recv, -9)
				fill(send, mine(run))
			}, func(run int) error {
				if me != root {
					return nil
				}
				return equal(recv, want(run), "gather in place")
			})
			if err != nil {
				return err
			}
			// Gatherv, gaps untouched.
			counts := vcounts(p, n)
			displs, total := gapped(counts)
			sendv := make([]int64, counts[me])
			var recvv []int64
			if me == root {
				recvv = make([]int64, total)
			}
			err = x.do(fmt.Sprintf("gatherv of %d to %d", n, root), gathervF(c, sendv, recvv, counts, displs, root), func(run int) {
				fill(sendv, func(i int) int64 { return xs(me, 1, i+shift(run)) })
				poison(recvv, -9)
			}, func(run int) error {
				if me != root {
					return nil
				}
				wantv := slices.Repeat([]int64{-9}, total)
				for r := 0; r < p; r++ {
					copy(wantv[displs[r]:], gen(counts[r], func(i int) int64 { return xs(r, 1, i+shift(run)) }))
				}
				return equal(recvv, wantv, "gatherv")
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func checkScatter(x *exec) error {
	c, me, p := x.c, x.c.Rank(), x.c.Size()
	for _, n := range x.o.counts() {
		for _, root := range x.o.roots(p) {
			blocks := func(send []int64, run int) {
				for r := 0; r < p; r++ {
					fill(send[r*n:r*n+n], func(i int) int64 { return xs(root, r, i+shift(run)) })
				}
			}
			mine := func(run int) []int64 { return gen(n, func(i int) int64 { return xs(root, me, i+shift(run)) }) }
			var send []int64
			if me == root {
				send = make([]int64, n*p)
			}
			recv := make([]int64, n)
			err := x.do(fmt.Sprintf("scatter of %d from %d", n, root), scatterF(c, send, recv, root), func(run int) {
				if me == root {
					blocks(send, run)
				}
				poison(recv, -9)
			}, func(run int) error { return equal(recv, mine(run), "scatter") })
			if err != nil {
				return err
			}
			// In place: the root's own block stays in send.
			send = nil
			recv = make([]int64, n)
			if me == root {
				send = make([]int64, n*p)
				recv = send[root*n : root*n+n]
			}
			err = x.do(fmt.Sprintf("scatter of %d from %d in place", n, root), scatterF(c, send, recv, root), func(run int) {
				if me == root {
					blocks(send, run)
				} else {
					poison(recv, -9)
				}
			}, func(run int) error { return equal(recv, mine(run), "scatter in place") })
			if err != nil {
				return err
			}
			counts := vcounts(p, n)
			displs, total := gapped(counts)
			var sendv []int64
			recvv := make([]int64, counts[me])
			if me == root {
				sendv = make([]int64, total)
				recvv = sendv[displs[root] : displs[root]+counts[root]] // in place
			}
			err = x.do(fmt.Sprintf("scatterv of %d from %d", n, root), scattervF(c, sendv, counts, displs, recvv, root), func(run int) {
				if me == root {
					fill(sendv, func(i int) int64 { return int64(i*3 + shift(run)) })
				} else {
					poison(recvv, -9)
				}
			}, func(run int) error {
				return equal(recvv, gen(counts[me], func(i int) int64 { return int64((displs[me]+i)*3 + shift(run)) }), "scatterv")
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func checkAllgather(x *exec) error {
	c, me, p := x.c, x.c.Rank(), x.c.Size()
	counts := x.o.counts()
	if p <= 65 {
		// Large blocks take the algorithms for large messages; past 65
		// goroutine ranks their 5 MB per rank would cost the most of the
		// suite's time for no shape the sizes below do not reach.
		counts = append(counts, 5000)
	}
	for _, n := range counts {
		want := func(run int) []int64 {
			w := make([]int64, 0, n*p)
			for r := 0; r < p; r++ {
				w = append(w, gen(n, func(i int) int64 { return xs(r, 2, i+shift(run)) })...)
			}
			return w
		}
		mine := func(run int) func(i int) int64 { return func(i int) int64 { return xs(me, 2, i+shift(run)) } }
		send, recv := make([]int64, n), make([]int64, n*p)
		err := x.do(fmt.Sprintf("allgather of %d", n), allgatherF(c, send, recv), func(run int) {
			fill(send, mine(run))
			poison(recv, -9)
		}, func(run int) error { return equal(recv, want(run), "allgather") })
		if err != nil {
			return err
		}
		ip := make([]int64, n*p)
		own := ip[me*n : me*n+n]
		err = x.do(fmt.Sprintf("allgather of %d in place", n), allgatherF(c, own, ip), func(run int) {
			poison(ip, -9)
			fill(own, mine(run))
		}, func(run int) error { return equal(ip, want(run), "allgather in place") })
		if err != nil {
			return err
		}
		counts := vcounts(p, n)
		displs, total := gapped(counts)
		sendv, recvv := make([]int64, counts[me]), make([]int64, total)
		err = x.do(fmt.Sprintf("allgatherv of %d", n), allgathervF(c, sendv, recvv, counts, displs), func(run int) {
			fill(sendv, func(i int) int64 { return xs(me, 3, i+shift(run)) })
			poison(recvv, -9)
		}, func(run int) error {
			wantv := slices.Repeat([]int64{-9}, total)
			for r := 0; r < p; r++ {
				copy(wantv[displs[r]:], gen(counts[r], func(i int) int64 { return xs(r, 3, i+shift(run)) }))
			}
			return equal(recvv, wantv, "allgatherv")
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func checkAlltoall(x *exec) error {
	c, me, p := x.c, x.c.Rank(), x.c.Size()
	for _, n := range x.o.counts() {
		input := func(buf []int64, run int) {
			for j := 0; j < p; j++ {
				fill(buf[j*n:j*n+n], func(i int) int64 { return xs(me, j, i+shift(run)) })
			}
		}
		want := func(run int) []int64 {
			var w []int64
			for j := 0; j < p; j++ {
				w = append(w, gen(n, func(i int) int64 { return xs(j, me, i+shift(run)) })...)
			}
			return w
		}
		send, recv := make([]int64, n*p), make([]int64, n*p)
		err := x.do(fmt.Sprintf("alltoall of %d", n), alltoallF(c, send, recv), func(run int) {
			input(send, run)
			poison(recv, -9)
		}, func(run int) error { return equal(recv, want(run), "alltoall") })
		if err != nil {
			return err
		}
		ip := make([]int64, n*p)
		err = x.do(fmt.Sprintf("alltoall of %d in place", n), alltoallF(c, ip, ip), func(run int) { input(ip, run) },
			func(run int) error { return equal(ip, want(run), "alltoall in place") })
		if err != nil {
			return err
		}
		// Alltoallv: rank i sends ((i+2j)%3)*n/2 elements to rank j.
		sc := func(i, j int) int { return ((i + 2*j) % 3) * n / 2 }
		scounts := gen(p, func(j int) int { return sc(me, j) })
		rcounts := gen(p, func(j int) int { return sc(j, me) })
		sdispls, stotal := gapped(scounts)
		rdispls, rtotal := gapped(rcounts)
		sv, rv := make([]int64, stotal), make([]int64, rtotal)
		err = x.do(fmt.Sprintf("alltoallv of %d", n), alltoallvF(c, sv, scounts, sdispls, rv, rcounts, rdispls), func(run int) {
			for j := 0; j < p; j++ {
				fill(sv[sdispls[j]:sdispls[j]+scounts[j]], func(i int) int64 { return xs(me, j, i+shift(run)) })
			}
			poison(rv, -9)
		}, func(run int) error {
			wv := slices.Repeat([]int64{-9}, rtotal)
			for j := 0; j < p; j++ {
				copy(wv[rdispls[j]:], gen(rcounts[j], func(i int) int64 { return xs(j, me, i+shift(run)) }))
			}
			return equal(rv, wv, "alltoallv")
		})
		if err != nil {
			return err
		}
		// In place: rank i sends rank j as many elements as it receives
		// from it (recvCounts both ways), so the counts are symmetric:
		// ((i+j)%3)*n/2, uneven, some zero, with gaps; the send counts are
		// ignored (nil).
		ic := func(i, j int) int { return ((i + j) % 3) * n / 2 }
		counts := gen(p, func(j int) int { return ic(me, j) })
		displs, total := gapped(counts)
		buf := make([]int64, total)
		err = x.do(fmt.Sprintf("alltoallv of %d in place", n), alltoallvF(c, buf, nil, nil, buf, counts, displs), func(run int) {
			poison(buf, -9)
			for j := 0; j < p; j++ {
				fill(buf[displs[j]:displs[j]+counts[j]], func(i int) int64 { return xs(me, j, i+shift(run)) })
			}
		}, func(run int) error {
			wip := slices.Repeat([]int64{-9}, total)
			for j := 0; j < p; j++ {
				copy(wip[displs[j]:], gen(counts[j], func(i int) int64 { return xs(j, me, i+shift(run)) }))
			}
			return equal(buf, wip, "alltoallv in place")
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func checkReduceScatter(x *exec) error {
	c, me, p := x.c, x.c.Rank(), x.c.Size()
	for _, n := range x.o.counts() {
		want := func(run int) []int64 { return gen(n, func(i int) int64 { return sumInts(0, p, me*n+i+shift(run)) }) }
		send, recv := make([]int64, n*p), make([]int64, n)
		err := x.do(fmt.Sprintf("reduce_scatter_block of %d", n), reduceScatterBlockF(c, send, recv, mpi.Sum), func(run int) {
			fill(send, func(i int) int64 { return xi(me, i+shift(run)) })
			poison(recv, -9)
		}, func(run int) error { return equal(recv, want(run), "reduce_scatter_block") })
		if err != nil {
			return err
		}
		ip := make([]int64, n*p)
		err = x.do(fmt.Sprintf("reduce_scatter_block of %d in place", n), reduceScatterBlockF(c, ip, ip[:n], mpi.Sum), func(run int) {
			fill(ip, func(i int) int64 { return xi(me, i+shift(run)) })
		}, func(run int) error { return equal(ip[:n], want(run), "reduce_scatter_block in place") })
		if err != nil {
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
		a, out := make([]uint64, total), make([]uint64, counts[me])
		err = x.do(fmt.Sprintf("reduce_scatter of %d", n), reduceScatterF(c, a, out, counts, affine), func(run int) {
			fill(a, func(i int) uint64 { return xa(me, i+shift(run)) })
			poison(out, 9)
		}, func(run int) error {
			return equal(out, gen(counts[me], func(i int) uint64 { return composeAffine(0, p, before+i+shift(run)) }), "reduce_scatter of a non-commutative op")
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkErrors: arguments every rank gets wrong alike fail on every rank,
// before any message, with their class and the name of the form called
// (Iallreduce, AllreduceInit); nonblocking and persistent forms return no
// request then. The communicator works after.
func checkErrors(x *exec) error {
	c, p := x.c, x.c.Size()
	b := make([]int, 4)
	cases := []struct {
		what  string
		class mpierr.Class
		f     forms
	}{
		{"a root past the size", mpierr.ErrRoot, bcastF(c, []int{1}, p)},
		{"a negative root", mpierr.ErrRoot, reduceF(c, []int{1}, []int{0}, mpi.Sum, -1)},
		{"a root past the size", mpierr.ErrRoot, gatherF(c, []int{1}, make([]int, p), p)},
		{"a negative root", mpierr.ErrRoot, scattervF(c, []int{1}, []int{1}, []int{0}, []int{0}, -2)},
		{"sum of bool", mpierr.ErrOp, allreduceF(c, []bool{true}, []bool{true}, mpi.Sum)},
		{"band of float64", mpierr.ErrOp, allreduceF(c, []float64{1}, []float64{1}, mpi.BAnd)},
		{"minloc of int", mpierr.ErrOp, allreduceF(c, []int{1}, []int{1}, mpi.MinLoc)},
		{"a nil op", mpierr.ErrOp, allreduceF(c, []int{1}, []int{1}, nil)},
		{"a nil op", mpierr.ErrOp, scanF(c, []int{1}, []int{1}, nil)},
		{"prod of bool", mpierr.ErrOp, exscanF(c, []bool{true}, []bool{true}, mpi.Prod)},
		{"allreduce of 2 into 3", mpierr.ErrCount, allreduceF(c, []int{1, 2}, []int{0, 0, 0}, mpi.Sum)},
		{"allgather into the wrong size", mpierr.ErrCount, allgatherF(c, []int{1}, make([]int, p+1))},
		{"allgatherv with a count per rank and one more", mpierr.ErrCount, allgathervF(c, []int{1}, make([]int, p+1), make([]int, p+1), make([]int, p+1))},
		{"reduce_scatter_block of the wrong size", mpierr.ErrCount, reduceScatterBlockF(c, make([]int, p+1), []int{0}, mpi.Sum)},
		{"reduce_scatter with a negative count", mpierr.ErrCount, reduceScatterF(c, []int{1}, []int{0}, slices.Repeat([]int{-1}, p), mpi.Sum)},
		{"alltoallv with too few counts", mpierr.ErrCount, alltoallvF(c, []int{1}, []int{1}, []int{0}, []int{0}, nil, nil)},
		{"overlapping buffers", mpierr.ErrBuffer, allreduceF(c, b[:2], b[1:3], mpi.Sum)},
	}
	if p > 1 {
		// Every length is a multiple of one.
		cases = append(cases, struct {
			what  string
			class mpierr.Class
			f     forms
		}{"alltoall of a length not a multiple of the size", mpierr.ErrCount, alltoallF(c, make([]int, p+1), make([]int, p+1))})
	}
	var errs []error
	for _, cs := range cases {
		var err error
		var req *mpi.Request
		name := cs.f.name
		switch x.o.Mode {
		case Nonblocking:
			req, err = cs.f.start()
			name = cs.f.nbName()
		case Persistent:
			req, err = cs.f.init()
			name = cs.f.initName()
		default:
			err = cs.f.blocking()
		}
		switch {
		case !errors.Is(err, cs.class):
			errs = append(errs, fmt.Errorf("%s %s: %v, want class %s", name, cs.what, err, cs.class.Name()))
		case !strings.Contains(err.Error(), "mpi: "+name+" on "+c.Name()+":"):
			errs = append(errs, fmt.Errorf("%s %s: the error does not name %s on %s: %v", name, cs.what, name, c.Name(), err))
		case req != nil:
			errs = append(errs, fmt.Errorf("%s %s: a request besides the error", name, cs.what))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return x.do("barrier after the errors", barrierF(c), nothing, func(int) error { return nil })
}
