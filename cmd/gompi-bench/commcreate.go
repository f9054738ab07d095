package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/lwgrp"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// commOps are what commcreate times: each makes a communicator and frees
// it. Create and CreateGroup use the even ranks; only the members of a
// CreateGroup call it, with the algorithm of
// mpi_comm_create_group_algorithm.
var commOps = []string{"dup", "split", "create", "creategroup", "lwgrp-list+allreduce", "lwgrp-jump+allreduce", "split+allreduce"}

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
		fmt.Fprintf(w, "# lwgrp-list: a logring of the even ranks from the list (no message); lwgrp-jump: from a ring by pointer jumping;\n")
		fmt.Fprintf(w, "# then one 8-byte Allreduce over it; split+allreduce: Comm.Split by parity, one 8-byte Allreduce, Free\n")
		fmt.Fprintf(w, "# %-18s %14s %14s %14s %14s\n", "Operation", "Avg (us)", "Max (us)", "Msgs/rank", "Bytes/member")
	}
	alg := inst.Base().Lookup(mpi.CreateGroupAlgorithmParam).Str()
	for _, op := range ops {
		member := me%2 == 0
		ct := &countingTransport{Comm: c}
		run := func() (*mpi.Comm, error) {
			switch op {
			case "lwgrp-list+allreduce", "lwgrp-jump+allreduce":
				if !member {
					return nil, nil
				}
				return nil, lwgrpAllreduce(ct, even, op == "lwgrp-jump+allreduce")
			case "split+allreduce":
				sub, err := c.Split(me%2, 0)
				if err != nil {
					return nil, err
				}
				var sum [1]int64
				if err := mpi.Allreduce(sub, []int64{1}, sum[:], mpi.Sum); err != nil {
					return nil, err
				}
				return sub, nil
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
		bytes := -1.0 // not counted
		if ct.bytes > 0 || op == "lwgrp-list+allreduce" || op == "lwgrp-jump+allreduce" {
			bytes = float64(ct.bytes) / float64(iters)
		}
		stats := []float64{per, msgs, bytes}
		var sum, hi [3]float64
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
			bytesCol := "-"
			if hi[2] >= 0 {
				bytesCol = fmt.Sprintf("%.0f", hi[2])
			}
			fmt.Fprintf(w, "%-20s %14.1f %14.1f %14.1f %14s\n", name, sum[0]/float64(n), hi[0], sum[1]/float64(n), bytesCol)
		}
	}
	return c.Barrier()
}

// sent counts the messages this rank's PML has sent.
func sent(inst *mpi.Instance) uint64 {
	s := inst.PMLStats()
	return s.LLPHits + s.Eager + s.Pipelined + s.Rendezvous + s.RGet
}

// lwgrpAllreduce builds a logring of members (from the list, or from a
// ring by pointer jumping) and runs one 8-byte Allreduce over it.
func lwgrpAllreduce(t pml.Transport, members []int, jump bool) error {
	var g *lwgrp.LogRing
	var err error
	if jump {
		var ring *lwgrp.Ring
		if ring, err = lwgrp.RingFromList(t, members); err == nil {
			g, err = lwgrp.LogRingFromRing(ring, 90)
		}
	} else {
		g, err = lwgrp.LogRingFromList(t, members)
	}
	if err != nil {
		return err
	}
	var sum [1]int64
	return lwgrp.Allreduce(&g.LogChain, []int64{1}, sum[:], mpi.Sum, 91)
}

// countingTransport counts the bytes this rank sends through it.
type countingTransport struct {
	*mpi.Comm
	bytes int64
}

func (t *countingTransport) Send(buf []byte, dst, tag int) error {
	t.bytes += int64(len(buf))
	return t.Comm.Send(buf, dst, tag)
}

// Isend is counted too: lwgrp's pointer jumping sends both ways at once.
func (t *countingTransport) Isend(buf []byte, dst, tag int) (*mpi.Request, error) {
	t.bytes += int64(len(buf))
	return t.Comm.Isend(buf, dst, tag)
}

func (t *countingTransport) Sendrecv(sendbuf []byte, dst, sendtag int, recvbuf []byte, src, recvtag int) (mpi.Status, error) {
	t.bytes += int64(len(sendbuf))
	return t.Comm.Sendrecv(sendbuf, dst, sendtag, recvbuf, src, recvtag)
}
