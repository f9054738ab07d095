package main

import (
	"fmt"
	"io"

	"github.com/gompi/gompi/mpi"
)

// Tags of the benchmark's own messages.
const (
	tagData    = 1
	tagWindow  = 100
	tagAck     = 101
	tagBarrier = 200
	tagProbe   = 201
)

// bench runs the chosen benchmark on every rank; rank 0 prints.
func bench(inst *mpi.Instance, o *options, w io.Writer) error {
	c := inst.CommWorld()
	if c.Size() < 2 {
		return usagef("%s needs at least 2 ranks: mpirun -np 2 gompi-bench %s", o.kind, o.kind)
	}
	if o.comm == "incl" {
		// Every rank but the last: a strict subset of the world, which a
		// sparse store keeps relative to it (the whole world would simply
		// be the world's own dense group).
		n := max(c.Size()-1, 2)
		members := make([]int, n)
		for i := range members {
			members[i] = i
		}
		g, err := c.Group().Incl(members)
		if err != nil {
			return err
		}
		sub, err := c.Create(g)
		if err != nil {
			return err
		}
		if sub == nil { // the last rank is not a member: it only waits
			return inst.Runtime().Barrier()
		}
		defer sub.Free()
		c = sub
	}
	me := c.Rank()
	// Ranks beyond 0 and 1 take no part: they wait in the launcher's
	// barrier, which blocks without spinning, so that they take no
	// processor from the two that measure.
	if me >= 2 {
		return inst.Runtime().Barrier()
	}
	nodeOf := inst.Runtime().Job().NodeOf
	sameNode := nodeOf[0] == nodeOf[1]
	var p *prober
	if o.probe {
		if !sameNode {
			return usagef("--probe needs ranks 0 and 1 on one node")
		}
		var err error
		if p, err = newProber(c, inst.JobID()); err != nil {
			return err
		}
		defer p.close()
	}
	if me == 0 {
		format, bytes, _ := c.Group().Storage()
		fmt.Fprintf(w, "# communicator: %s of %d ranks, group stored %s in %d bytes\n", o.comm, c.Size(), format, bytes)
		header(w, inst, o, sameNode)
	}
	// Large buffers come from the heap, page aligned; the send buffer
	// never changes, as in osu_latency and osu_bw.
	sbuf, rbuf := make([]byte, maxSize), make([]byte, maxSize)
	for i := range sbuf {
		sbuf[i] = byte('a' + me)
	}
	for _, n := range o.sizes {
		iters, warm := o.counts(n)
		pre := p.ns(c)
		if err := barrier(c); err != nil {
			return err
		}
		var value float64
		var err error
		var phaseLine string
		switch o.kind {
		case latency:
			value, err = pingPong(c, sbuf[:n], rbuf[:n], iters, warm)
		case bw, bibw:
			var ph *phases
			if o.phases {
				ph = newPhases(iters)
			}
			value, err = window(c, sbuf[:n], rbuf[:n], iters, warm, o.window, o.kind == bibw, ph)
			if err == nil && ph != nil {
				phaseLine, err = ph.report(c, n, o.window)
			}
		}
		if err != nil {
			return fmt.Errorf("%s, %d bytes: %w", o.kind, n, err)
		}
		post := p.ns(c)
		if me == 0 {
			if o.kind == latency {
				fmt.Fprintf(w, "%-10d %14.3f\n", n, value)
			} else {
				fmt.Fprintf(w, "%-10d %14.2f\n", n, value)
			}
			if p != nil {
				fmt.Fprintf(w, "# probe size=%d pre=%.1f post=%.1f\n", n, pre, post)
			}
			fmt.Fprint(w, phaseLine)
		}
	}
	if me == 0 {
		s := inst.PMLStats()
		fmt.Fprintf(w, "# pml counters rank 0: llp_hits=%d llp_fallbacks=%d eager=%d pipelined=%d rendezvous=%d rget=%d rget_fallbacks=%d unexpected=%d\n",
			s.LLPHits, s.LLPFallbacks, s.Eager, s.Pipelined, s.Rendezvous, s.RGet, s.RGetFallbacks, s.Unexpected)
	}
	if err := barrier(c); err != nil {
		return err
	}
	return inst.Runtime().Barrier()
}

// pingPong is osu_latency: rank 0 sends, rank 1 sends back; it returns the
// one-way time in µs on rank 0.
func pingPong(c *mpi.Comm, sbuf, rbuf []byte, iters, warm int) (float64, error) {
	me := c.Rank()
	if me > 1 {
		return 0, nil
	}
	peer := 1 - me
	var t0 timer
	for i := 0; i < iters+warm; i++ {
		if i == warm {
			t0.start()
		}
		if me == 0 {
			if err := c.Send(sbuf, peer, tagData); err != nil {
				return 0, err
			}
			if _, err := c.Recv(rbuf, peer, tagData); err != nil {
				return 0, err
			}
		} else {
			if _, err := c.Recv(rbuf, peer, tagData); err != nil {
				return 0, err
			}
			if err := c.Send(sbuf, peer, tagData); err != nil {
				return 0, err
			}
		}
	}
	us := t0.us()
	if err := checkData(rbuf, peer); err != nil {
		return 0, err
	}
	return us / (2 * float64(iters)), nil
}

// window is osu_bw (rank 0 sends a window, rank 1 acknowledges it) or,
// with both, osu_bibw (both send a window to each other); it returns MB/s
// on rank 0.
func window(c *mpi.Comm, sbuf, rbuf []byte, iters, warm, win int, both bool, ph *phases) (float64, error) {
	me := c.Rank()
	if me > 1 {
		return 0, nil
	}
	peer := 1 - me
	reqs := make([]*mpi.Request, 0, 2*win)
	var ack [4]byte
	var t0 timer
	for i := 0; i < iters+warm; i++ {
		if i == warm {
			t0.start()
		}
		ph.stamp(i-warm, 0)
		reqs = reqs[:0]
		if both || me == 1 {
			for j := 0; j < win; j++ {
				r, err := c.Irecv(rbuf, peer, tagWindow)
				if err != nil {
					return 0, err
				}
				reqs = append(reqs, r)
			}
		}
		if both || me == 0 {
			for j := 0; j < win; j++ {
				r, err := c.Isend(sbuf, peer, tagWindow)
				if err != nil {
					return 0, err
				}
				reqs = append(reqs, r)
			}
		}
		ph.stamp(i-warm, 1)
		if err := mpi.Waitall(reqs, nil); err != nil {
			return 0, err
		}
		ph.stamp(i-warm, 2)
		if !both {
			var err error
			if me == 0 {
				_, err = c.Recv(ack[:], peer, tagAck)
			} else {
				err = c.Send(ack[:], peer, tagAck)
			}
			if err != nil {
				return 0, err
			}
		}
	}
	us := t0.us()
	if both || me == 1 {
		if err := checkData(rbuf, peer); err != nil {
			return 0, err
		}
	}
	bytes := float64(len(sbuf)) * float64(win) * float64(iters)
	if both {
		bytes *= 2
	}
	return bytes / us, nil // bytes per µs = 10^6 bytes per second
}

// checkData looks at the last byte received: the sender fills its buffer
// with 'a' + its rank.
func checkData(rbuf []byte, from int) error {
	if n := len(rbuf); n > 0 && rbuf[n-1] != byte('a'+from) {
		return fmt.Errorf("data check failed: the last byte from rank %d is %q, want %q", from, rbuf[n-1], byte('a'+from))
	}
	return nil
}

// barrier waits for every rank, with point-to-point messages (gompi has no
// collectives yet): everyone reports to rank 0, which releases them.
// barrier synchronises ranks 0 and 1, the two that measure.
func barrier(c *mpi.Comm) error {
	peer := 1 - c.Rank()
	if err := c.Send(nil, peer, tagBarrier); err != nil {
		return err
	}
	_, err := c.Recv(nil, peer, tagBarrier)
	return err
}
