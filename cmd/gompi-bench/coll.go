package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
)

// The collective benchmarks measure as mpi-anchors/allreduce.c does, so
// that the numbers compare with Open MPI's and MPICH's: per size a
// warm-up, a barrier, then the timed calls back to back on every rank; the
// value is the mean over ranks of each rank's time per call, in µs, with
// the fastest and slowest rank's beside it.

// defaultCollSizes are allreduce.c's: 8 B, 1 KiB, 64 KiB, 1 MiB.
const defaultCollSizes = "8,1k,64k,1m"

// collIterations are allreduce.c's for its sizes (100000 calls of 8 B
// down to 500 of 1 MiB), and the barrier's 100000.
func collIterations(k benchKind, size int) int {
	switch {
	case k == barrierKind || size <= 8:
		return 100000
	case size <= 1024:
		return 50000
	case size <= 65536:
		return 5000
	case size <= 1<<20:
		return 500
	}
	return 100
}

// isColl tells the collective benchmarks from the point-to-point ones.
func (k benchKind) isColl() bool { return k >= barrierKind }

// collBench runs one collective benchmark on every rank; rank 0 prints.
func collBench(inst *mpi.Instance, o *options, w io.Writer) error {
	c := inst.CommWorld()
	me, n := c.Rank(), c.Size()
	var p *prober
	if o.probe {
		nodeOf := inst.Runtime().Job().NodeOf
		if n < 2 || nodeOf[0] != nodeOf[1] {
			return usagef("--probe needs ranks 0 and 1 on one node")
		}
		var err error
		if p, err = newProber(c, inst.JobID()); err != nil {
			return err
		}
		defer p.close()
	}
	sizes := o.sizes
	if o.kind == barrierKind {
		sizes = []int{0}
	}
	if o.root >= n {
		return usagef("--root %d: accepted: a rank of the job, 0 to %d", o.root, n-1)
	}
	if me == 0 {
		what := strings.ReplaceAll(collWhat[o.kind], "rank 0", fmt.Sprintf("rank %d", o.root))
		if o.nonblock {
			what = "the nonblocking form, then its Wait: " + what
		}
		fmt.Fprintf(w, "# gompi-bench %s: %s\n", o.kind, what)
		fmt.Fprintf(w, "# gompi %s, %d ranks, value = mean over ranks of each rank's time per call; min and max over ranks\n", mca.GompiVersion, n)
		fmt.Fprintf(w, "# coll table of MPI_COMM_WORLD: %s\n", c.CollTable())
		fmt.Fprintf(w, "# tcp lines: messages (frames) and bytes (headers and payloads) btl tcp sent per call of the timed loop, summed over ranks\n")
		fmt.Fprintf(w, "# %-8s %14s %14s %14s\n", "Size", "Avg (us)", "Min (us)", "Max (us)")
	}
	for _, size := range sizes {
		iters, warm := o.collCounts(size)
		op, err := collOp(o, c, size)
		if err != nil {
			return err
		}
		for i := 0; i < warm; i++ {
			if err := op(); err != nil {
				return fmt.Errorf("%s, %d bytes: %w", o.kind, size, err)
			}
		}
		pre := p.ns(c)
		if err := c.Barrier(); err != nil {
			return err
		}
		// What tcp sends between the two readings is this rank's part of
		// the timed calls: the barrier's frames were counted when it sent
		// them, and the loop's are when its last call returns.
		tcp0, hasTCP := inst.TransportStats()["tcp"]
		t0 := time.Now()
		for i := 0; i < iters; i++ {
			if err := op(); err != nil {
				return fmt.Errorf("%s, %d bytes: %w", o.kind, size, err)
			}
		}
		per := float64(time.Since(t0).Nanoseconds()) / 1e3 / float64(iters)
		tcp1 := inst.TransportStats()["tcp"]
		post := p.ns(c)
		// Summed: the time, tcp's frames and bytes per call, and the ranks
		// that have tcp.
		mine := []float64{per, float64(tcp1.Frames-tcp0.Frames) / float64(iters), float64(tcp1.Bytes-tcp0.Bytes) / float64(iters), 0}
		if hasTCP {
			mine[3] = 1
		}
		var sum [4]float64
		var lo, hi [1]float64
		if err := mpi.Reduce(c, mine, sum[:], mpi.Sum, 0); err != nil {
			return err
		}
		if err := mpi.Reduce(c, mine[:1], lo[:], mpi.Min, 0); err != nil {
			return err
		}
		if err := mpi.Reduce(c, mine[:1], hi[:], mpi.Max, 0); err != nil {
			return err
		}
		if me == 0 {
			fmt.Fprintf(w, "%-10d %14.3f %14.3f %14.3f\n", size, sum[0]/float64(n), lo[0], hi[0])
			if p != nil {
				fmt.Fprintf(w, "# probe size=%d pre=%.1f post=%.1f iters=%d\n", size, pre, post, iters)
			}
			note := ""
			if sum[3] == 0 {
				note = " (btl tcp is not in use)"
			}
			fmt.Fprintf(w, "# tcp size=%d msgs=%.2f bytes=%.1f%s\n", size, sum[1], sum[2], note)
		}
	}
	return c.Barrier()
}

var collWhat = map[benchKind]string{
	barrierKind:   "Barrier",
	bcastKind:     "Bcast of SIZE bytes from rank 0",
	reduceKind:    "Reduce of SIZE bytes of float64, Sum, to rank 0",
	allreduceKind: "Allreduce of SIZE bytes of float64, Sum (allreduce.c's MPI_DOUBLE, MPI_SUM)",
	allgatherKind: "Allgather of SIZE bytes from every rank",
	alltoallKind:  "Alltoall of SIZE bytes to every rank",
	gatherKind:    "Gather of SIZE bytes from every rank to rank 0",
	scatterKind:   "Scatter of SIZE bytes to every rank from rank 0",
}

// collCounts returns the timed and warm-up calls for a size: --iterations
// or allreduce.c's by size, times --scale; the warm-up is a tenth, at
// least 2, unless --warmup says.
func (o *options) collCounts(size int) (iters, warm int) {
	iters = o.iterations
	if iters == 0 {
		iters = max(int(float64(collIterations(o.kind, size))*o.scale), 2)
	}
	warm = o.warmup
	if warm < 0 {
		warm = max(iters/10, 2)
	}
	return iters, warm
}

// collOp returns one call of the benchmark's collective on buffers made
// once (o.nonblock: the nonblocking form and its Wait; rooted ones at
// o.root); the reductions check their first result, so that a wrong sum is
// an error rather than a fast number.
func collOp(o *options, c *mpi.Comm, size int) (func() error, error) {
	k, root, nb := o.kind, o.root, o.nonblock
	me, n := c.Rank(), c.Size()
	// pick returns the blocking call, or the nonblocking one with its Wait.
	pick := func(blocking func() error, start func() (*mpi.Request, error)) func() error {
		if !nb {
			return blocking
		}
		return func() error {
			r, err := start()
			if err != nil {
				return err
			}
			_, err = r.Wait()
			return err
		}
	}
	switch k {
	case barrierKind:
		return pick(c.Barrier, c.Ibarrier), nil
	case bcastKind:
		buf := make([]byte, size)
		return pick(func() error { return mpi.Bcast(c, buf, root) }, func() (*mpi.Request, error) { return mpi.Ibcast(c, buf, root) }), nil
	case reduceKind, allreduceKind:
		if size%8 != 0 {
			return nil, usagef("%s reduces float64: size %d is not a multiple of 8", k, size)
		}
		send, recv := make([]float64, size/8), make([]float64, size/8)
		for i := range send {
			send[i] = float64(me + 1)
		}
		want := float64(n*(n+1)) / 2
		checked := false
		check := func() error {
			if checked || len(recv) == 0 || (k == reduceKind && me != root) {
				return nil
			}
			checked = true
			if recv[0] != want || recv[len(recv)-1] != want {
				return fmt.Errorf("%s check failed: %g, want %g", k, recv[len(recv)-1], want)
			}
			return nil
		}
		var call func() error
		if k == reduceKind {
			call = pick(func() error { return mpi.Reduce(c, send, recv, mpi.Sum, root) },
				func() (*mpi.Request, error) { return mpi.Ireduce(c, send, recv, mpi.Sum, root) })
		} else {
			call = pick(func() error { return mpi.Allreduce(c, send, recv, mpi.Sum) },
				func() (*mpi.Request, error) { return mpi.Iallreduce(c, send, recv, mpi.Sum) })
		}
		return func() error {
			if err := call(); err != nil {
				return err
			}
			return check()
		}, nil
	case allgatherKind:
		send, recv := make([]byte, size), make([]byte, size*n)
		return pick(func() error { return mpi.Allgather(c, send, recv) }, func() (*mpi.Request, error) { return mpi.Iallgather(c, send, recv) }), nil
	case alltoallKind:
		send, recv := make([]byte, size*n), make([]byte, size*n)
		return pick(func() error { return mpi.Alltoall(c, send, recv) }, func() (*mpi.Request, error) { return mpi.Ialltoall(c, send, recv) }), nil
	case gatherKind:
		send := make([]byte, size)
		var recv []byte
		if me == root {
			recv = make([]byte, size*n)
		}
		return pick(func() error { return mpi.Gather(c, send, recv, root) }, func() (*mpi.Request, error) { return mpi.Igather(c, send, recv, root) }), nil
	case scatterKind:
		var send []byte
		if me == root {
			send = make([]byte, size*n)
		}
		recv := make([]byte, size)
		return pick(func() error { return mpi.Scatter(c, send, recv, root) }, func() (*mpi.Request, error) { return mpi.Iscatter(c, send, recv, root) }), nil
	}
	return nil, fmt.Errorf("%s is not a collective benchmark", k)
}
