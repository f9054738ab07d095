package schedule

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
	"github.com/gompi/gompi/mpierr"
)

// The schedules below are written as a plugin author would, reading the
// input where it is needed rather than copying it first: run in place
// without care, their writes to Output would change the input under them.

// ringAllgather passes blocks round a ring. Input is the rank's block
// alone (Input [0, 1) at n parts), and a step keeps its block index, so
// the rank's block reaches Output [me, me+1) by message: it goes to the
// next rank first, and comes back from it last.
func ringAllgather(n, me int) *Schedule {
	s := &Schedule{Op: coll.Allgather, Size: n, Rank: me, Parts: n}
	if n == 1 {
		s.Rounds = [][]Step{{{Kind: Copy, Src: Input, Dst: Output, First: 0, End: 1}}}
		return s
	}
	mod := func(b int) int { return ((b % n) + n) % n }
	next, prev := (me+1)%n, (me-1+n)%n
	for k := 0; k < n-1; k++ {
		send := Step{Kind: Send, Peer: next, Src: Output, First: mod(me - k), End: mod(me-k) + 1}
		if k == 0 {
			send = Step{Kind: Send, Peer: next, Src: Input, First: 0, End: 1}
		}
		rb := mod(me - k - 1)
		s.Rounds = append(s.Rounds, []Step{send, {Kind: Recv, Peer: prev, Dst: Output, First: rb, End: rb + 1}})
	}
	s.Rounds = append(s.Rounds, []Step{
		{Kind: Send, Peer: prev, Src: Output, First: prev, End: prev + 1},
		{Kind: Recv, Peer: next, Dst: Output, First: me, End: me + 1},
	})
	return s
}

// pairwiseAlltoall: in round k, block me+k goes to rank me+k and block
// me-k comes from rank me-k.
func pairwiseAlltoall(n, me int) *Schedule {
	s := &Schedule{Op: coll.Alltoall, Size: n, Rank: me, Parts: n}
	s.Rounds = append(s.Rounds, []Step{{Kind: Copy, Src: Input, Dst: Output, First: me, End: me + 1}})
	for k := 1; k < n; k++ {
		to, from := (me+k)%n, (me-k+n)%n
		s.Rounds = append(s.Rounds, []Step{
			{Kind: Send, Peer: to, Src: Input, First: to, End: to + 1},
			{Kind: Recv, Peer: from, Dst: Output, First: from, End: from + 1},
		})
	}
	return s
}

// linearScan: the prefix comes from the rank below into Output, is
// combined with the rank's input and goes on up.
func linearScan(exclusive bool) func(n, me int) *Schedule {
	op := coll.Scan
	if exclusive {
		op = coll.Exscan
	}
	return func(n, me int) *Schedule {
		s := &Schedule{Op: op, Size: n, Rank: me, Parts: 1}
		all := func(k Kind, peer int, src, dst Buffer) Step {
			return Step{Kind: k, Peer: peer, Src: src, Dst: dst, First: 0, End: 1}
		}
		up := me < n-1
		switch {
		case me == 0 && exclusive:
			if up {
				s.Rounds = [][]Step{{all(Send, 1, Input, None)}}
			}
		case me == 0:
			s.Rounds = [][]Step{{all(Copy, 0, Input, Output)}}
			if up {
				s.Rounds = append(s.Rounds, []Step{all(Send, 1, Output, None)})
			}
		default:
			s.Rounds = [][]Step{{all(Recv, me-1, None, Output)}}
			if exclusive && !up {
				break
			}
			// Scratch = prefix op input.
			s.Rounds = append(s.Rounds, []Step{all(Copy, 0, Input, Scratch), all(Reduce, 0, Output, Scratch)})
			if exclusive {
				s.Rounds = append(s.Rounds, []Step{all(Send, me+1, Scratch, None)})
				break
			}
			s.Rounds[1] = append(s.Rounds[1], all(Copy, 0, Scratch, Output))
			if up {
				s.Rounds = append(s.Rounds, []Step{all(Send, me+1, Output, None)})
			}
		}
		return s
	}
}

// ringReduceScatterBlock: blocks go round a ring, each rank adding its
// input's block as it passes (commutative ops only); the rank that
// completes block b sends it to rank b, which receives it into Output.
func ringReduceScatterBlock(n, me int) *Schedule {
	s := &Schedule{Op: coll.ReduceScatterBlock, Size: n, Rank: me, Parts: n}
	if n == 1 {
		s.Rounds = [][]Step{{{Kind: Copy, Src: Input, Dst: Output, First: 0, End: 1}}}
		return s
	}
	mod := func(b int) int { return ((b % n) + n) % n }
	next, prev := (me+1)%n, (me-1+n)%n
	for k := 0; k < n-1; k++ {
		sb, rb := mod(me-k), mod(me-k-1)
		src := Scratch
		if k == 0 {
			src = Input
		}
		s.Rounds = append(s.Rounds, []Step{
			{Kind: Send, Peer: next, Src: src, First: sb, End: sb + 1},
			{Kind: Recv, Peer: prev, Dst: Scratch, First: rb, End: rb + 1},
			{Kind: Reduce, Src: Input, Dst: Scratch, First: rb, End: rb + 1},
		})
	}
	done := mod(me + 1) // the block this rank completed
	s.Rounds = append(s.Rounds, []Step{
		{Kind: Send, Peer: done, Src: Scratch, First: done, End: done + 1},
		{Kind: Recv, Peer: prev, Dst: Output, First: 0, End: 1},
	})
	return s
}

// The schedules of every operation a plugin may fill, for TestEveryOp.
var fillable = map[coll.Op]struct {
	gen         func(n, me int) *Schedule
	commutative bool // the schedule combines out of rank order
}{
	coll.Barrier:            {gen: disseminationBarrier},
	coll.Allreduce:          {gen: ringAllreduce, commutative: true},
	coll.Allgather:          {gen: ringAllgather},
	coll.Alltoall:           {gen: pairwiseAlltoall},
	coll.Scan:               {gen: linearScan(false)},
	coll.Exscan:             {gen: linearScan(true)},
	coll.ReduceScatterBlock: {gen: ringReduceScatterBlock, commutative: true},
}

// Every operation of the table either takes schedules, which then give
// its results for every call (in place or not, every size, every
// reduction they may combine), or is refused by Validate, naming the
// operation and what its calls differ by that a schedule cannot know:
// a bcast schedule written for root 0 must not run for root 1.
func TestEveryOp(t *testing.T) {
	o := colltest.Options{Sizes: []int{1, 2, 3, 4, 5, 8, 13}}
	if testing.Short() {
		o.Sizes = []int{1, 2, 3, 5}
	}
	refused := map[coll.Op]string{
		coll.Bcast: "root", coll.Reduce: "root", coll.Gather: "root", coll.Scatter: "root",
		coll.Gatherv: "root, counts and displacements", coll.Scatterv: "root, counts and displacements",
		coll.Allgatherv: "counts and displacements", coll.Alltoallv: "counts and displacements", coll.ReduceScatter: "counts and displacements",
	}
	for _, op := range coll.Ops() {
		why, refuse := refused[op]
		f, fills := fillable[op]
		if refuse == fills {
			t.Fatalf("%s: this test neither refuses it nor has a schedule for it", op)
		}
		if err := Fillable(op); (err == nil) != fills {
			t.Errorf("Fillable(%s): %v", op, err)
		}
		if refuse {
			// The simplest schedule, valid for any operation but this.
			s := &Schedule{Op: op, Size: 4, Rank: 1, Parts: 1, Rounds: [][]Step{{{Kind: Send, Peer: 2}, {Kind: Recv, Peer: 0}}}}
			err := s.Validate(op, 4, 1)
			says := "gompi runs no schedule for " + op.String() + ": its calls differ by " + why
			if !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), says) {
				t.Errorf("%s: Validate: %v, want ErrArg saying %q", op, err, says)
			}
			continue
		}
		o := o
		o.Commutative = f.commutative
		colltest.Conformance(t, op, scheduled(op, f.gen), o)
	}
}

// A schedule whose blocks reach past a buffer the operation has shorter
// (an allgather's input is one rank's block) does not fit: Run says so
// before any message, where it ran the step on no bytes and gave wrong
// results.
func TestRunRefusesBlocksPastTheBuffer(t *testing.T) {
	const n = 3
	err := colltest.NewWorld(n, false).Run(func(c coll.Comm) error {
		// Input [0, 1) of 1 part is the whole n blocks' bytes.
		s := &Schedule{Op: coll.Allgather, Size: n, Rank: c.Rank(), Parts: 1, Rounds: [][]Step{{{Kind: Copy, Src: Input, Dst: Output, First: 0, End: 1}}}}
		if err := s.Validate(coll.Allgather, n, c.Rank()); err != nil {
			return err
		}
		err := Run(c, &coll.Args{Op: coll.Allgather, Send: make([]byte, 4), Recv: make([]byte, 4*n)}, s)
		const says = "round 0, step 0 (copy): blocks [0, 1) end at byte 12, past the 4 bytes of Input"
		if !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), says) {
			t.Errorf("rank %d: %v, want ErrArg saying %q", c.Rank(), err, says)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// gompi leaves rank 0's receive buffer of an exscan as it was (mpi.Exscan
// says so), also when the schedule writes Output there.
func TestExscanLeavesRankZero(t *testing.T) {
	const n = 3
	gen := func(n, me int) *Schedule {
		s := linearScan(true)(n, me)
		if me == 0 {
			s.Rounds = append([][]Step{{{Kind: Copy, Src: Input, Dst: Output, First: 0, End: 1}}}, s.Rounds...)
		}
		return s
	}
	sum := datatype.Reducer{Size: 1, Apply: func(in, inout []byte) {
		for i := range inout {
			inout[i] += in[i]
		}
	}}
	for _, inPlace := range []bool{false, true} {
		err := colltest.NewWorld(n, false).Run(func(c coll.Comm) error {
			me := c.Rank()
			a := &coll.Args{Send: []byte{byte(me + 1), 10}, Recv: []byte{77, 77}, Reducer: sum}
			want := []byte{1, 10} // rank 0: its recv as it was
			if me > 0 {
				want = []byte{byte(me * (me + 1) / 2), byte(10 * me)}
			}
			if inPlace {
				a.Recv, a.Send, a.InPlace = a.Send, nil, true
				if me == 0 {
					want = []byte{1, 10}
				}
			} else if me == 0 {
				want = []byte{77, 77}
			}
			if err := scheduled(coll.Exscan, gen)(c, a); err != nil {
				return err
			}
			if !bytes.Equal(a.Recv, want) {
				t.Errorf("in place %v, rank %d: %v, want %v", inPlace, me, a.Recv, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A reduce step in an operation that combines nothing (it has no
// reduction to run) is refused at validation, not at every call.
func TestValidateRefusesReduceWithoutReduction(t *testing.T) {
	for _, op := range []coll.Op{coll.Barrier, coll.Allgather, coll.Alltoall} {
		s := &Schedule{Op: op, Size: 2, Rank: 0, Parts: 1, Rounds: [][]Step{{{Kind: Reduce, Src: Input, Dst: Output, First: 0, End: 1}}}}
		says := "round 0, step 0 (reduce): " + op.String() + " combines nothing"
		if err := s.Validate(op, 2, 0); !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want ErrArg saying %q", op, err, says)
		}
	}
}

// Run lends the Scratch buffer from the communicator's (Args.Scratch), so
// that a collective in a loop reuses it rather than allocating its length
// each call, and zeroes it as new memory is: a schedule that reads scratch
// blocks it never wrote reads zeros, not an earlier call's bytes.
func TestScratchIsLentAndZeroed(t *testing.T) {
	copyStep := func(src, dst Buffer) []Step { return []Step{{Kind: Copy, Src: src, Dst: dst, First: 0, End: 1}} }
	err := colltest.NewWorld(1, false).Run(func(c coll.Comm) error {
		fill := &Schedule{Op: coll.Allreduce, Size: 1, Parts: 1, Rounds: [][]Step{copyStep(Input, Scratch), copyStep(Scratch, Output)}}
		read := &Schedule{Op: coll.Allreduce, Size: 1, Parts: 1, Rounds: [][]Step{copyStep(Scratch, Output)}}
		for _, s := range []*Schedule{fill, read} {
			if err := s.Validate(coll.Allreduce, 1, 0); err != nil {
				return err
			}
		}
		const n = 4096
		a := &coll.Args{Op: coll.Allreduce, Send: bytes.Repeat([]byte{7}, n), Recv: make([]byte, n), Scratch: &coll.Scratch{Keep: 1 << 20}}
		if err := Run(c, a, fill); err != nil {
			return err
		}
		if a.Recv[n-1] != 7 {
			t.Errorf("through scratch: %d, want 7", a.Recv[n-1])
		}
		if err := Run(c, a, read); err != nil {
			return err
		}
		if !bytes.Equal(a.Recv, make([]byte, n)) {
			t.Errorf("a scratch block read before any write holds %d…, want zeros", a.Recv[:4])
		}
		if allocs := testing.AllocsPerRun(50, func() { _ = Run(c, a, fill) }); allocs != 0 {
			t.Errorf("%v allocations a call; want none: the scratch comes from Args.Scratch", allocs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
