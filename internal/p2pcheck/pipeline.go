package p2pcheck

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gompi/gompi/components/pml/ob1"
	"github.com/gompi/gompi/mpi"
)

// pipeSizes are the sizes around the thresholds of a route to peer: the
// eager limit, the first fragment of a pipelined message (its header's
// chunk), one and two following fragments, the pipeline limit; each at,
// below and above, and odd sizes between. Where the route has no pipeline
// the same sizes check the rendezvous.
func pipeSizes(inst *mpi.Instance, peer int) []int {
	a := inst.BML().Peer(peer).Send[0].Attr
	eager := a.EagerLimit - ob1.MatchHeaderLen
	head := a.MaxSendSize - ob1.RndvHeaderLen
	frag := a.MaxSendSize - ob1.FragHeaderLen
	var sizes []int
	for _, s := range []int{eager, eager + 1, eager + 777, head, head + 1, head + frag, head + frag + 1,
		head + 2*frag - 3, a.PipelineLimit - 1, a.PipelineLimit, a.PipelineLimit + 1, a.PipelineLimit/2 + 13} {
		if s >= 16 && s <= max(a.PipelineLimit+1, eager+1<<16) {
			sizes = append(sizes, s)
		}
	}
	slices.Sort(sizes)
	return slices.Compact(sizes)
}

// checkPipelined checks the sender's counters after sizes went to peer:
// the wantPiped of them in the pipelined range went pipelined. Unless
// pml_ob1_rdma_choice is always, a message in that range may instead be
// offered by RDMA Get, for the receiver's measure to choose (ob1's
// rdmachoice.go): then each size above the eager limit went pipelined, by
// RDMA Get or by rendezvous, and no more than wantPiped pipelined.
func checkPipelined(inst *mpi.Instance, before mpi.PMLStats, sizes []int, peer, eager, lim, wantPiped int) error {
	after := inst.PMLStats()
	piped := after.Pipelined - before.Pipelined
	_, choice, _ := inst.Params().Lookup("pml_ob1_rdma_choice")
	if choice.String() == "always" {
		if piped != uint64(wantPiped) {
			return fmt.Errorf("sizes %v to rank %d (eager limit %d, pipeline limit %d): %d went pipelined, want %d",
				sizes, peer, eager, lim, piped, wantPiped)
		}
		return nil
	}
	above := 0
	for _, s := range sizes {
		if s > eager {
			above++
		}
	}
	other := after.RGet - before.RGet + after.Rendezvous - before.Rendezvous
	if piped > uint64(wantPiped) || piped+other != uint64(above) {
		return fmt.Errorf("sizes %v to rank %d (eager limit %d, pipeline limit %d): %d went pipelined (at most %d), %d by RDMA Get or rendezvous; want %d in all",
			sizes, peer, eager, lim, piped, wantPiped, other, above)
	}
	return nil
}

// Messages above the eager limit and up to the pipeline limit go eagerly in
// several fragments (ob1's PIPE), without waiting for their receive. At each
// threshold and between: received unexpected (all sent before any receive
// is posted, so the fragments are held) and posted, several in flight both
// ways at once, by AnySource after a Probe, and truncated in the middle of
// a fragment. The sender's counters say that the sizes up to the limit went
// pipelined and the next one did not.
func checkPipeline(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	inst := c.Instance()
	if c != inst.CommWorld() || n < 2 {
		return nil // the routes below are looked up by world rank
	}
	right, left := (me+1)%n, (me+n-1)%n
	out, in := pipeSizes(inst, right), pipeSizes(inst, left)
	lim := inst.BML().Peer(right).Send[0].Attr.PipelineLimit
	eager := inst.BML().Peer(right).Send[0].Attr.EagerLimit - ob1.MatchHeaderLen
	wantPiped := 0
	for _, s := range out {
		if s > eager && s <= lim {
			wantPiped++
		}
	}

	// Unexpected: every message is sent before the receives are posted;
	// the barrier's messages come after them in the ring, so they have all
	// arrived when it returns (the pipelined ones whole).
	before := inst.PMLStats()
	var reqs []*mpi.Request
	for i, s := range out {
		r, err := c.Isend(msg(me, 90, i, s), right, 90)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	if err := Barrier(c); err != nil {
		return err
	}
	for i, s := range in {
		h, err := recvMsg(c, make([]byte, s+8), left, 90)
		if err != nil {
			return fmt.Errorf("unexpected %d-byte message: %w", s, err)
		}
		if h.size != s || h.idx != i {
			return fmt.Errorf("unexpected message %d: %+v, want %d bytes", i, h, s)
		}
	}
	// (A rendezvous completes once received: wait only now.)
	if err := mpi.Waitall(reqs, nil); err != nil {
		return err
	}
	if err := checkPipelined(inst, before, out, right, eager, lim, wantPiped); err != nil && right != me {
		return err
	}

	// Posted, and both ways at once: every rank posts its receives from
	// both neighbours, then sends to both.
	reqs = reqs[:0]
	var bufs [][]byte
	for _, side := range []struct{ peer, tag int }{{left, 91}, {right, 92}} {
		for _, s := range pipeSizes(inst, side.peer) {
			b := make([]byte, s)
			r, err := c.Irecv(b, side.peer, side.tag)
			if err != nil {
				return err
			}
			reqs, bufs = append(reqs, r), append(bufs, b)
		}
	}
	if err := Barrier(c); err != nil {
		return err
	}
	var sends []*mpi.Request
	for _, side := range []struct{ peer, tag int }{{right, 91}, {left, 92}} {
		for i, s := range pipeSizes(inst, side.peer) {
			r, err := c.Isend(msg(me, side.tag, i, s), side.peer, side.tag)
			if err != nil {
				return err
			}
			sends = append(sends, r)
		}
	}
	for i, r := range reqs {
		if _, err := waitMsg(r, bufs[i]); err != nil {
			return fmt.Errorf("posted receive %d: %w", i, err)
		}
	}
	if err := mpi.Waitall(sends, nil); err != nil {
		return err
	}

	// AnySource after a Probe at rank 0; blocking sends (which complete
	// once their fragments are in the transport).
	if me != 0 {
		to0 := pipeSizes(inst, 0)
		s := to0[len(to0)/2] + me
		if err := c.Send(msg(me, 93, 0, s), 0, 93); err != nil {
			return err
		}
	} else {
		for k := 1; k < n; k++ {
			st, err := c.Probe(mpi.AnySource, 93)
			if err != nil {
				return err
			}
			want := pipeSizes(inst, st.Source)
			if st.Count != want[len(want)/2]+st.Source {
				return fmt.Errorf("Probe: %+v, want %d bytes", st, want[len(want)/2]+st.Source)
			}
			h, err := recvMsg(c, make([]byte, st.Count), mpi.AnySource, 93)
			if err != nil {
				return err
			}
			if h.size != st.Count {
				return fmt.Errorf("AnySource after Probe of %+v: got %+v", st, h)
			}
		}
	}

	// Truncated in the middle of a later fragment, posted and unexpected:
	// the buffer is filled, never more.
	big, s := largestPiped(inst, right, out), largestPiped(inst, left, in)
	if err := Barrier(c); err != nil {
		return err
	}
	r, err := c.Isend(msg(me, 94, 0, big), right, 94)
	if err != nil {
		return err
	}
	for k := 0; k < 2; k++ {
		keep := s - s/3 - 5
		full := make([]byte, keep+64)
		for j := range full {
			full[j] = 0xEE
		}
		var st mpi.Status
		if k == 0 {
			// By now the message has likely arrived: unexpected.
			st, err = c.Recv(full[:keep:keep], left, 94)
		} else {
			var rr *mpi.Request
			if rr, err = c.Irecv(full[:keep:keep], left, 95); err == nil {
				if err = Barrier(c); err == nil {
					var sr *mpi.Request
					if sr, err = c.Isend(msg(me, 95, 0, big), right, 95); err == nil {
						st, err = rr.Wait()
						if werr := wait(sr, nil); werr != nil {
							return werr
						}
					}
				}
			}
		}
		if !errors.Is(err, mpi.ErrTruncate) || st.Count != keep {
			return fmt.Errorf("%d-byte message into %d bytes: %+v, %v; want ErrTruncate", s, keep, st, err)
		}
		if want := msg(left, 94+k, 0, s)[:keep]; string(full[:keep]) != string(want) {
			return fmt.Errorf("truncated %d-byte message: the kept bytes differ", s)
		}
		for j := keep; j < len(full); j++ {
			if full[j] != 0xEE {
				return fmt.Errorf("truncated %d-byte message: byte %d past the buffer was written", s, j)
			}
		}
	}
	return wait(r, nil)
}

// largestPiped is the largest of sizes that goes pipelined to peer, or the
// largest when none does.
func largestPiped(inst *mpi.Instance, peer int, sizes []int) int {
	lim := inst.BML().Peer(peer).Send[0].Attr.PipelineLimit
	for i := len(sizes) - 1; i >= 0; i-- {
		if sizes[i] <= lim {
			return sizes[i]
		}
	}
	return sizes[len(sizes)-1]
}
