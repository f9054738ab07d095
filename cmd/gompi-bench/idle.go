package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gompi/gompi/mpi"
)

// Where the idle benchmark's other ranks wait.
var idleWaits = []string{"recv", "wait", "finalize", "barrier"}

// defaultLoops makes rank 0's loop take about 190 ms on the 2-core machines
// gompi is measured on (0.9 ns per step).
const defaultLoops = 210_000_000

// spin is a fixed amount of CPU work: a chain of dependent multiply-adds
// that no compiler shortens (mpi-anchors' idle.c runs the same one).
func spin(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// idle is the oversubscription benchmark: rank 0 times a fixed CPU loop
// while every other rank waits for it, in Recv, in Wait, in Barrier or in
// Finalize, then releases them. Run it with -np 1 for the loop's time alone:
// the ratio of the two is what waiting ranks cost the one that works.
func idle(inst *mpi.Instance, o *options, w io.Writer) error {
	c := inst.CommWorld()
	me, n := c.Rank(), c.Size()
	if me != 0 {
		switch o.in {
		case "recv":
			var b [1]byte
			_, err := c.Recv(b[:], 0, tagData)
			return err
		case "wait":
			var b [1]byte
			r, err := c.Irecv(b[:], 0, tagData)
			if err != nil {
				return err
			}
			_, err = r.Wait()
			return err
		case "barrier":
			return c.Barrier()
		}
		return nil // finalize: main's Finalize waits for rank 0
	}
	t0 := time.Now()
	x := spin(o.loops)
	ms := float64(time.Since(t0).Microseconds()) / 1e3
	pol := inst.WaitPolicy()
	fmt.Fprintf(w, "# gompi-bench idle: rank 0 runs %d loop steps while %d ranks wait in %s (check %d)\n", o.loops, n-1, o.in, x&1)
	fmt.Fprintf(w, "# wait policy: yield %v (%s)\n", pol.Yield, pol.Why)
	fmt.Fprintf(w, "# %-8s %14s\n", "Waiting", "Loop (ms)")
	fmt.Fprintf(w, "%-10d %14.1f\n", n-1, ms)
	for r := 1; r < n && (o.in == "recv" || o.in == "wait"); r++ {
		if err := c.Send([]byte{1}, r, tagData); err != nil {
			return err
		}
	}
	if o.in == "barrier" {
		return c.Barrier()
	}
	return nil
}
