// Command recoverprog is the program of the recovery suite
// (internal/faulttest TestRecovery), run under mpirun --enable-recovery:
// every rank runs the same random sequence of blocking collectives on the
// world (the seed is the argument), with random roots and sizes from a few
// bytes to above coll sm's and coll tuned's limits (read from the
// instance's parameters), checking every result, until one fails because
// the test killed a rank. Then it shrinks the world, checks the new size and
// runs 100 Allreduce with the right sums on the survivors.
//
//	recoverprog SEED
//
// Lines, each rank's:
//
//	ready <rank> <pid> <job>              the loop has run its first collective
//	failed <rank> <unixnano> <class> <op> <iteration>
//	                                      a collective failed at that wall-clock time
//	recovered <rank> <size> <world ranks of the shrunk communicator, comma-separated>
//	finalized <world rank>                Finalize returned
//
// An error other than ErrProcFailed or ErrRevoked, a wrong result, a wrong
// size or sum after Shrink ends the rank with a message and status 1.
package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
)

// limits are the parameters whose values route a collective to one
// algorithm or component or another: the sizes are drawn around them.
var limits = []string{
	"coll_sm_max_bytes",
	"coll_sm_split_bytes",
	"coll_sm_pair_bytes",
	"coll_sm_rooted_min_bytes",
	"coll_tuned_bcast_segment_size",
	"coll_tuned_bcast_large_bytes",
	"coll_tuned_allreduce_large_bytes",
	"coll_tuned_allreduce_ring_bytes",
	"coll_tuned_allgather_large_bytes",
	"coll_tuned_alltoall_small_bytes",
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: recoverprog SEED")
		os.Exit(2)
	}
	seed, err := strconv.ParseUint(os.Args[1], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recoverprog: bad seed", os.Args[1])
		os.Exit(2)
	}
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "recoverprog:", err)
		os.Exit(1)
	}
	world := inst.CommWorld()
	die := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "recoverprog: rank %d: %s\n", world.Rank(), fmt.Sprintf(format, a...))
		os.Exit(1)
	}
	sizes, err := candidateSizes(inst)
	if err != nil {
		die("%v", err)
	}
	p := &prog{w: world, me: world.Rank(), n: world.Size(), rng: rand.New(rand.NewPCG(seed, 0)), sizes: sizes}
	for it := 0; ; it++ {
		if it == 1 {
			fmt.Printf("ready %d %d %s\n", p.me, os.Getpid(), os.Getenv("GOMPI_JOB_ID"))
		}
		op, err := p.step(it)
		if err == nil {
			continue
		}
		// The time first: the test compares it with the kill's.
		at := time.Now().UnixNano()
		if !errors.Is(err, mpi.ErrProcFailed) && !errors.Is(err, mpi.ErrRevoked) {
			die("%s, iteration %d: %v (class %s), want ErrProcFailed or ErrRevoked", op, it, err, mpierr.ClassOf(err).Name())
		}
		fmt.Printf("failed %d %d %s %s %d\n", p.me, at, mpierr.ClassOf(err).Name(), op, it)
		break
	}
	if err := recoverAfter(world); err != nil {
		die("%v", err)
	}
	me := world.Rank()
	if err := inst.Finalize(); err != nil {
		die("Finalize: %v", err)
	}
	fmt.Printf("finalized %d\n", me)
}

// recoverAfter shrinks w after a death and checks the survivors' communicator.
func recoverAfter(w *mpi.Comm) error {
	s, err := w.Shrink()
	if err != nil {
		return fmt.Errorf("Shrink: %w", err)
	}
	if s.Size() != w.Size()-1 {
		return fmt.Errorf("Shrink made %d ranks of %d, want %d", s.Size(), w.Size(), w.Size()-1)
	}
	ranks := make([]int, s.Size())
	for r := range ranks {
		ranks[r] = r
	}
	worlds, err := s.Group().TranslateRanks(ranks, w.Group())
	if err != nil {
		return err
	}
	var sum int64
	for _, r := range worlds {
		sum += int64(r)
	}
	me := int64(w.Rank())
	n := int64(s.Size())
	var out [2]int64
	for it := int64(0); it < 100; it++ {
		// Two values, so that a sum of the wrong members cannot come out
		// right by chance.
		in := []int64{me*(it+1) + it, 1}
		if err := mpi.Allreduce(s, in, out[:], mpi.Sum); err != nil {
			return fmt.Errorf("Allreduce %d after Shrink: %w", it, err)
		}
		if want := sum*(it+1) + n*it; out[0] != want || out[1] != n {
			return fmt.Errorf("Allreduce %d after Shrink: %v, want [%d %d]", it, out, want, n)
		}
	}
	var names []string
	for _, r := range worlds {
		names = append(names, strconv.Itoa(r))
	}
	fmt.Printf("recovered %d %d %s\n", s.Rank(), s.Size(), strings.Join(names, ","))
	return s.Free()
}

// candidateSizes are the message sizes in bytes to draw from: a few small
// ones, and for every limit just below, at and just above it, and twice
// it.
func candidateSizes(inst *mpi.Instance) ([]int, error) {
	set := map[int]bool{8: true, 64: true, 1000: true}
	for _, name := range limits {
		_, v, ok := inst.Params().Lookup(name)
		if !ok {
			return nil, fmt.Errorf("no parameter %s", name)
		}
		l := int(v.Uint())
		for _, s := range []int{l - 8, l, l + 8, 2 * l} {
			if s > 0 {
				set[s] = true
			}
		}
	}
	var out []int
	for s := range set {
		out = append(out, s)
	}
	sort.Ints(out)
	return out, nil
}

type prog struct {
	w     *mpi.Comm
	me, n int
	rng   *rand.Rand
	sizes []int
}

// count draws an element count (int64 elements) from the sizes.
func (p *prog) count() int {
	return max(1, p.sizes[p.rng.IntN(len(p.sizes))]/8)
}

// counts draws a count per rank for the v forms: some zero, the rest up to
// a drawn count.
func (p *prog) counts() ([]int, []int, int) {
	top := p.count()
	counts := make([]int, p.n)
	displs := make([]int, p.n)
	total := 0
	for r := range counts {
		if p.rng.IntN(4) != 0 {
			counts[r] = 1 + p.rng.IntN(top)
		}
		displs[r] = total
		total += counts[r]
	}
	return counts, displs, total
}

// val is element i of rank r's contribution in iteration it: distinct
// enough that a misplaced element shows.
func val(it, r, i int) int64 { return int64(it)*7 + int64(r)*1_000_003 + int64(i) }

// sumTo is the sum of val(it, r, i) over ranks r < k.
func sumTo(it, k, i int) int64 {
	return int64(k)*(int64(it)*7+int64(i)) + 1_000_003*int64(k*(k-1)/2)
}

var ops = []string{"Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv",
	"Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Scan", "Exscan", "ReduceScatter", "ReduceScatterBlock"}

// step runs iteration it's collective, drawn from the shared sequence, and
// checks its result. It draws every random number before the call, so
// that all ranks stay in step.
func (p *prog) step(it int) (string, error) {
	op := ops[p.rng.IntN(len(ops))]
	root := p.rng.IntN(p.n)
	me, n := p.me, p.n
	var err error
	bad := func(where string, got, want int64) error {
		return mpierr.Errorf(mpierr.ErrOther, "%s, iteration %d, root %d: %s is %d, want %d", op, it, root, where, got, want)
	}
	fill := func(k, r int) []int64 {
		b := make([]int64, k)
		for i := range b {
			b[i] = val(it, r, i)
		}
		return b
	}
	switch op {
	case "Barrier":
		err = p.w.Barrier()
	case "Bcast":
		k := p.count()
		buf := make([]int64, k)
		if me == root {
			buf = fill(k, root)
		}
		if err = mpi.Bcast(p.w, buf, root); err == nil {
			for _, i := range []int{0, k - 1} {
				if want := val(it, root, i); buf[i] != want {
					return op, bad(fmt.Sprintf("element %d", i), buf[i], want)
				}
			}
		}
	case "Reduce", "Allreduce":
		k := p.count()
		recv := make([]int64, k)
		if op == "Reduce" {
			err = mpi.Reduce(p.w, fill(k, me), recv, mpi.Sum, root)
		} else {
			err = mpi.Allreduce(p.w, fill(k, me), recv, mpi.Sum)
		}
		if err == nil && (op == "Allreduce" || me == root) {
			for i := range recv {
				if want := sumTo(it, n, i); recv[i] != want {
					return op, bad(fmt.Sprintf("element %d", i), recv[i], want)
				}
			}
		}
	case "Scan", "Exscan":
		k := p.count()
		recv := make([]int64, k)
		upTo := me + 1
		if op == "Scan" {
			err = mpi.Scan(p.w, fill(k, me), recv, mpi.Sum)
		} else {
			err = mpi.Exscan(p.w, fill(k, me), recv, mpi.Sum)
			upTo = me
		}
		if err == nil && upTo > 0 {
			for _, i := range []int{0, k - 1} {
				if want := sumTo(it, upTo, i); recv[i] != want {
					return op, bad(fmt.Sprintf("element %d", i), recv[i], want)
				}
			}
		}
	case "Gather", "Allgather":
		k := max(1, p.count()/n)
		recv := make([]int64, n*k)
		if op == "Gather" {
			if me != root {
				recv = nil
			}
			err = mpi.Gather(p.w, fill(k, me), recv, root)
		} else {
			err = mpi.Allgather(p.w, fill(k, me), recv)
		}
		if err == nil && recv != nil {
			for r := 0; r < n; r++ {
				if want := val(it, r, k-1); recv[r*k+k-1] != want {
					return op, bad(fmt.Sprintf("rank %d's last element", r), recv[r*k+k-1], want)
				}
			}
		}
	case "Gatherv", "Allgatherv":
		counts, displs, total := p.counts()
		recv := make([]int64, total)
		if op == "Gatherv" {
			if me != root {
				recv = nil
			}
			err = mpi.Gatherv(p.w, fill(counts[me], me), recv, counts, displs, root)
		} else {
			err = mpi.Allgatherv(p.w, fill(counts[me], me), recv, counts, displs)
		}
		if err == nil && recv != nil {
			for r := 0; r < n; r++ {
				if c := counts[r]; c > 0 {
					if want := val(it, r, c-1); recv[displs[r]+c-1] != want {
						return op, bad(fmt.Sprintf("rank %d's last element", r), recv[displs[r]+c-1], want)
					}
				}
			}
		}
	case "Scatter":
		k := max(1, p.count()/n)
		var send []int64
		if me == root {
			send = fill(n*k, root)
		}
		recv := make([]int64, k)
		if err = mpi.Scatter(p.w, send, recv, root); err == nil {
			if want := val(it, root, me*k+k-1); recv[k-1] != want {
				return op, bad("last element", recv[k-1], want)
			}
		}
	case "Scatterv":
		counts, displs, total := p.counts()
		var send []int64
		if me == root {
			send = fill(total, root)
		}
		recv := make([]int64, counts[me])
		if err = mpi.Scatterv(p.w, send, counts, displs, recv, root); err == nil && counts[me] > 0 {
			c := counts[me]
			if want := val(it, root, displs[me]+c-1); recv[c-1] != want {
				return op, bad("last element", recv[c-1], want)
			}
		}
	case "Alltoall":
		k := max(1, p.count()/n)
		send := make([]int64, n*k)
		for j := 0; j < n; j++ {
			for i := 0; i < k; i++ {
				send[j*k+i] = val(it, me, j*k+i)
			}
		}
		recv := make([]int64, n*k)
		if err = mpi.Alltoall(p.w, send, recv); err == nil {
			for r := 0; r < n; r++ {
				if want := val(it, r, me*k+k-1); recv[r*k+k-1] != want {
					return op, bad(fmt.Sprintf("rank %d's last element", r), recv[r*k+k-1], want)
				}
			}
		}
	case "Alltoallv":
		// c(i, j) elements go from rank i to rank j, the same draw on
		// every rank.
		top := max(1, p.count()/n)
		c := make([][]int, n)
		for i := range c {
			c[i] = make([]int, n)
			for j := range c[i] {
				if p.rng.IntN(4) != 0 {
					c[i][j] = 1 + p.rng.IntN(top)
				}
			}
		}
		sc, sd, rc, rd := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
		st, rt := 0, 0
		for j := 0; j < n; j++ {
			sc[j], sd[j], st = c[me][j], st, st+c[me][j]
			rc[j], rd[j], rt = c[j][me], rt, rt+c[j][me]
		}
		send := fill(st, me)
		recv := make([]int64, rt)
		if err = mpi.Alltoallv(p.w, send, sc, sd, recv, rc, rd); err == nil {
			for r := 0; r < n; r++ {
				if rc[r] == 0 {
					continue
				}
				// Rank r sent its elements at its displacement for me.
				off := 0
				for j := 0; j < me; j++ {
					off += c[r][j]
				}
				if want := val(it, r, off+rc[r]-1); recv[rd[r]+rc[r]-1] != want {
					return op, bad(fmt.Sprintf("rank %d's last element", r), recv[rd[r]+rc[r]-1], want)
				}
			}
		}
	case "ReduceScatterBlock":
		k := max(1, p.count()/n)
		recv := make([]int64, k)
		if err = mpi.ReduceScatterBlock(p.w, fill(n*k, me), recv, mpi.Sum); err == nil {
			for _, i := range []int{0, k - 1} {
				if want := sumTo(it, n, me*k+i); recv[i] != want {
					return op, bad(fmt.Sprintf("element %d", i), recv[i], want)
				}
			}
		}
	case "ReduceScatter":
		counts, displs, total := p.counts()
		recv := make([]int64, counts[me])
		if err = mpi.ReduceScatter(p.w, fill(total, me), recv, counts, mpi.Sum); err == nil {
			for i := range recv {
				if want := sumTo(it, n, displs[me]+i); recv[i] != want {
					return op, bad(fmt.Sprintf("element %d", i), recv[i], want)
				}
			}
		}
	}
	return op, err
}
