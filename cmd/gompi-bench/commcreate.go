package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// commOps are what commcreate times: each makes a communicator and frees
// it. Create and CreateGroup use the even ranks; only the members of a
// CreateGroup call it, with the algorithm of
// mpi_comm_create_group_algorithm.
var commOps = []string{"dup", "split", "create", "creategroup"}

// createGroupAlgorithms are the values of mpi_comm_create_group_algorithm
// that --goroutines runs in turn.
var createGroupAlgorithms = []string{"dinan", "lwgrp"}

// commCreate times each way of making a communicator on the world: as
// processes under mpirun, or, with --goroutines N, as N goroutine ranks of
// this process (mpitest, over the same components), CreateGroup with each
// algorithm in turn. The row is "<op> <mean µs per call> <max over ranks>
// <messages sent per rank, mean>".
func commCreate(o *options, w io.Writer) error {
	if o.goroutines > 0 {
		var mu sync.Mutex
		lw := &lockedWriter{mu: &mu, w: w}
		for i, alg := range createGroupAlgorithms {
			ops := commOps
			if i > 0 {
				ops = []string{"creategroup"}
			}
			err := mpitest.RunErr(o.goroutines, func(r *mpitest.Rank) error {
				return commCreateRank(r.Instance, o, lw, ops, i == 0)
			}, mpitest.WithMCA(mpi.CreateGroupAlgorithmParam, alg))
			if err != nil {
				return err
			}
		}
		return nil
	}
	inst, err := mpi.Init()
	if err != nil {
		return err
	}
	err = commCreateRank(inst, o, w, commOps, true)
	if ferr := inst.Finalize(); err == nil {
		err = ferr
	}
	return err
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func commCreateRank(inst *mpi.Instance, o *options, w io.Writer, ops []string, header bool) error {
	c := inst.CommWorld()
	me, n := c.Rank(), c.Size()
	var even []int
	for r := 0; r < n; r += 2 {
		even = append(even, r)
	}
	g, err := c.Group().Incl(even)
	if err != nil {
		return err
	}
	iters := o.iterations
	if iters == 0 {
		iters = 20
	}
	if me == 0 && header {
		how := "processes"
		if o.goroutines > 0 {
			how = "goroutine ranks"
		}
		fmt.Fprintf(w, "# gompi-bench commcreate: %d %s, %d calls each (then Free); create and creategroup over the %d even ranks\n", n, how, iters, len(even))
		fmt.Fprintf(w, "# %-18s %14s %14s %14s\n", "Operation", "Avg (us)", "Max (us)", "Msgs/rank")
	}
	alg := inst.Base().Lookup(mpi.CreateGroupAlgorithmParam).Str()
	for _, op := range ops {
		member := me%2 == 0
		run := func() (*mpi.Comm, error) {
			switch op {
			case "dup":
				return c.Dup()
			case "split":
				return c.Split(me%2, me)
			case "create":
				return c.Create(g)
			}
			if !member {
				return nil, nil
			}
			return c.CreateGroup(g, 77)
		}
		name := op
		if op == "creategroup" {
			name += "(" + alg + ")"
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		before := sent(inst)
		t0 := time.Now()
		var failed error
		for i := 0; i < iters && failed == nil; i++ {
			nc, err := run()
			if err == nil && nc != nil {
				err = nc.Free()
			}
			failed = err
		}
		per := float64(time.Since(t0).Nanoseconds()) / 1e3 / float64(iters)
		msgs := float64(sent(inst)-before) / float64(iters)
		// A failure is reported, not fatal: lwgrp may not be built.
		var bad [1]int64
		if failed != nil {
			bad[0] = 1
			if me == 0 {
				fmt.Fprintf(w, "# %s failed on rank %d: %v\n", name, me, failed)
			}
		}
		stats := []float64{per, msgs}
		var sum, hi [2]float64
		var anyBad [1]int64
		if err := mpi.Reduce(c, stats, sum[:], mpi.Sum, 0); err != nil {
			return err
		}
		if err := mpi.Reduce(c, stats, hi[:], mpi.Max, 0); err != nil {
			return err
		}
		if err := mpi.Allreduce(c, bad[:], anyBad[:], mpi.Max); err != nil {
			return err
		}
		if me == 0 && anyBad[0] == 0 {
			fmt.Fprintf(w, "%-20s %14.1f %14.1f %14.1f\n", name, sum[0]/float64(n), hi[0], sum[1]/float64(n))
		}
	}
	return c.Barrier()
}

// sent counts the messages this rank's PML has sent.
func sent(inst *mpi.Instance) uint64 {
	s := inst.PMLStats()
	return s.LLPHits + s.Eager + s.Rendezvous + s.RGet
}
