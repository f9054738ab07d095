// Package schedule is a collective written as data: rounds of send,
// receive, reduce and copy steps over communicator ranks and blocks of the
// operation's buffers, which gompi checks and then runs natively. It is how
// a coll component that lives in another process (a go-plugin binary,
// consulted only at set-up) gives its algorithm to the host: the plugin
// answers with a schedule per communicator, rank and operation, the host
// validates it once (Validate: it is outside input), caches it, and runs
// it at full speed (Run). A schedule serves every call of its operation on
// the communicator, so only operations whose calls differ in nothing it
// cannot know (no root, no counts: Fillable) take one.
//
// Buffers are cut into Parts blocks of whole elements the way
// coll.Blocks cuts them, so that one schedule serves every message size;
// a step names a run of blocks [First, End) of one buffer.
package schedule

import (
	"fmt"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// Buffer names the region a step reads or writes.
type Buffer uint8

const (
	// None is no buffer: a step that moves no data (a barrier's messages).
	None Buffer = iota
	// Input is the rank's input: Args.Send, or Recv in place.
	Input
	// Output is Args.Recv.
	Output
	// Scratch is a buffer of the operation's length that Run provides.
	Scratch
	numBuffers
)

var bufferNames = [...]string{"None", "Input", "Output", "Scratch"}

func (b Buffer) String() string {
	if b < numBuffers {
		return bufferNames[b]
	}
	return fmt.Sprintf("buffer(%d)", b)
}

// Kind is what a step does.
type Kind uint8

const (
	// Send sends Src's blocks to Peer.
	Send Kind = iota + 1
	// Recv receives Peer's message into Dst's blocks; it must bring
	// exactly their length.
	Recv
	// Reduce combines Src's blocks into Dst's: dst = src op dst, so Src
	// holds the lower ranks' contribution (what keeps rank order).
	Reduce
	// Copy copies Src's blocks to Dst's.
	Copy
	numKinds
)

var kindNames = [...]string{"", "send", "recv", "reduce", "copy"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Step is one action of a round.
type Step struct {
	Kind Kind
	Peer int // communicator rank (send, recv)
	Src  Buffer
	Dst  Buffer
	// First and End delimit the blocks, [First, End) of Parts, that the
	// step reads in Src and writes in Dst.
	First, End int
}

// Schedule is one rank's part of one operation on one communicator.
type Schedule struct {
	// Op is the operation it implements.
	Op coll.Op
	// Size and Rank are the communicator it was made for.
	Size, Rank int
	// Parts is how many blocks every buffer is cut into (1 or more).
	Parts int
	// Rounds run in order. Within a round the receives are posted first,
	// then the sends go, then Run waits for all of them; the reduces and
	// copies run after, in order.
	Rounds [][]Step
}

// Limits on what a schedule may ask, so that a broken or hostile plugin
// cannot make the host allocate or loop without end.
const (
	MaxParts  = 1 << 16
	MaxRounds = 1 << 12
	MaxSteps  = 1 << 16
)

// Fillable says whether a schedule can implement op: nil, or an ErrArg
// error that says why not. A schedule is made per communicator and runs
// for every call of its operation there, so it can implement only the
// operations whose calls differ in nothing it cannot see: not by root
// (bcast, reduce, gather, scatter, gatherv, scatterv: a schedule written
// for root 0 would give wrong results for any other), and not by counts
// and displacements (gatherv, scatterv, allgatherv, alltoallv,
// reduce_scatter: a schedule cuts buffers into equal blocks).
func Fillable(op coll.Op) error {
	var why string
	switch op {
	case coll.Barrier, coll.Allreduce, coll.Allgather, coll.Alltoall, coll.Scan, coll.Exscan, coll.ReduceScatterBlock:
		return nil
	case coll.Bcast, coll.Reduce, coll.Gather, coll.Scatter:
		why = "its calls differ by root"
	case coll.Gatherv, coll.Scatterv:
		why = "its calls differ by root, counts and displacements"
	case coll.Allgatherv, coll.Alltoallv, coll.ReduceScatter:
		why = "its calls differ by counts and displacements"
	default:
		return mpierr.Errorf(mpierr.ErrArg, "schedule: unknown operation %s", op)
	}
	return mpierr.Errorf(mpierr.ErrArg, "gompi runs no schedule for %s: %s, which a schedule, made once per communicator, does not know", op, why)
}

// reduces reports whether op combines data, so that its schedules may
// have reduce steps.
func reduces(op coll.Op) bool {
	switch op {
	case coll.Barrier, coll.Allgather, coll.Alltoall:
		return false
	}
	return true
}

// Validate checks a schedule against the communicator and operation it is
// to run on: an operation a schedule can implement (Fillable), every peer
// a rank of it other than this one, every block run inside the buffers,
// buffers the operation has, reduces only where the operation combines
// data, and no step of a round reading or writing what a receive of that
// round writes. Its errors are ErrArg and say which round and step.
func (s *Schedule) Validate(op coll.Op, size, rank int) error {
	bad := func(format string, a ...any) error {
		return mpierr.Errorf(mpierr.ErrArg, "schedule for %s, rank %d of %d: "+format, append([]any{op, rank, size}, a...)...)
	}
	if err := Fillable(op); err != nil {
		return fmt.Errorf("schedule for %s, rank %d of %d: %w", op, rank, size, err)
	}
	switch {
	case s == nil:
		return bad("none")
	case s.Op != op || s.Size != size || s.Rank != rank:
		return bad("made for %s, rank %d of %d", s.Op, s.Rank, s.Size)
	case s.Parts < 1 || s.Parts > MaxParts:
		return bad("%d parts: accepted: 1 to %d", s.Parts, MaxParts)
	case len(s.Rounds) > MaxRounds:
		return bad("%d rounds: accepted: at most %d", len(s.Rounds), MaxRounds)
	}
	steps := 0
	// written marks the blocks the round's receives write; allocated once
	// and cleared after each round, so that many short rounds cost no more
	// than their bytes.
	var written [numBuffers][]bool
	var marked [][2]int // (buffer, block) to clear
	for ri, round := range s.Rounds {
		steps += len(round)
		if steps > MaxSteps {
			return bad("more than %d steps", MaxSteps)
		}
		for _, m := range marked {
			written[m[0]][m[1]] = false
		}
		marked = marked[:0]
		for si, st := range round {
			at := func(format string, a ...any) error {
				return bad("round %d, step %d (%s): "+format, append([]any{ri, si, st.Kind}, a...)...)
			}
			if st.Kind < Send || st.Kind >= numKinds {
				return at("unknown kind")
			}
			if st.Src >= numBuffers || st.Dst >= numBuffers {
				return at("unknown buffer")
			}
			if st.First < 0 || st.End < st.First || st.End > s.Parts {
				return at("blocks [%d, %d): accepted within [0, %d)", st.First, st.End, s.Parts)
			}
			switch st.Kind {
			case Send, Recv:
				if st.Peer < 0 || st.Peer >= size || st.Peer == rank {
					return at("peer %d: accepted: 0 to %d, not %d", st.Peer, size-1, rank)
				}
			}
			switch st.Kind {
			case Send:
				if st.Dst != None {
					return at("a send writes no buffer")
				}
			case Recv:
				if st.Src != None || st.Dst == Input {
					return at("a receive writes Output or Scratch, or nothing")
				}
			default:
				if st.Kind == Reduce && !reduces(op) {
					return at("%s combines nothing", op)
				}
				if st.Src == None || st.Dst == None || st.Dst == Input {
					return at("reads a buffer and writes Output or Scratch")
				}
				if st.Src == st.Dst {
					return at("source and destination are the same blocks")
				}
			}
			if st.Kind == Recv && st.Dst != None {
				w := written[st.Dst]
				if w == nil {
					w = make([]bool, s.Parts)
					written[st.Dst] = w
				}
				for b := st.First; b < st.End; b++ {
					if w[b] {
						return at("two receives of the round write block %d", b)
					}
					w[b] = true
					marked = append(marked, [2]int{int(st.Dst), b})
				}
			}
		}
		// A send of the round must not read what a receive of the same
		// round writes: they run at once.
		for si, st := range round {
			if st.Kind != Send || st.Src == None || written[st.Src] == nil {
				continue
			}
			for b := st.First; b < st.End; b++ {
				if written[st.Src][b] {
					return bad("round %d, step %d (send): reads block %d, which a receive of the round writes", ri, si, b)
				}
			}
		}
	}
	return nil
}

// Run executes a validated schedule on c with a's buffers, in the
// operation's tag space. The schedule sees every call as if it were not in
// place (operands). A step whose blocks end past their buffer (a schedule
// that does not fit the operation's buffers) is an ErrArg error, before
// any message; the receive of a step that brings another length than its
// blocks' is an ErrCount error.
func Run(c coll.Comm, a *coll.Args, s *Schedule) error {
	in, out, lent := operands(c, a, s.Op)
	defer a.Scratch.Put(lent...)
	n := max(len(in), len(out))
	elem := 1
	if a.Reducer.Size > 0 {
		elem = a.Reducer.Size
	}
	off, length := coll.Blocks(n, elem, s.Parts)
	if err := s.fits(off, length, len(in), len(out)); err != nil {
		return err
	}
	var scratch []byte
	defer func() { a.Scratch.Put(scratch) }()
	bufs := [numBuffers][]byte{None: nil, Input: in, Output: out}
	region := func(b Buffer, first, end int) []byte {
		if b == None || first == end {
			return nil
		}
		if b == Scratch && scratch == nil {
			// From the communicator's scratch (a loop reuses it), zeroed
			// as new memory is: a schedule may read a block of it before
			// any step writes there, and must read zeros, not an earlier
			// call's data.
			scratch = a.Scratch.Get(n)
			clear(scratch)
			bufs[Scratch] = scratch
		}
		return bufs[b][off[first] : off[end-1]+length[end-1]]
	}
	tag := coll.Tag(s.Op, 15)
	for _, round := range s.Rounds {
		if small(round, region) {
			// Every send is small: blocking sends complete eagerly, so they
			// go first and the receives follow in order, without requests
			// and on the low-latency path where there is one, as tuned's
			// native exchanges do.
			for _, st := range round {
				if st.Kind == Send {
					if err := c.Send(region(st.Src, st.First, st.End), st.Peer, tag); err != nil {
						return err
					}
				}
			}
			for _, st := range round {
				if st.Kind != Recv {
					continue
				}
				dst := region(st.Dst, st.First, st.End)
				got, err := c.Recv(dst, st.Peer, tag)
				if err == nil {
					err = coll.Exactly(c, got.Count, len(dst), st.Peer)
				}
				if err != nil {
					return err
				}
			}
		} else if err := exchange(c, round, region, tag); err != nil {
			return err
		}
		for _, st := range round {
			switch st.Kind {
			case Copy:
				datatype.CopyCached(region(st.Dst, st.First, st.End), region(st.Src, st.First, st.End))
			case Reduce:
				src, dst := region(st.Src, st.First, st.End), region(st.Dst, st.First, st.End)
				if a.Reducer.Apply == nil {
					return mpierr.Errorf(mpierr.ErrOp, "schedule for %s reduces without an op", s.Op)
				}
				a.Reducer.Apply(src, dst) // dst = src op dst
			}
		}
	}
	return nil
}

// operands returns the Input and Output a schedule works on, as they are
// when the call is not in place, whether it is or not, so that one schedule
// is right for both forms: in place, Input is a copy of the rank's input
// (else a write to Output could change it under the schedule), cut as the
// send buffer would be (allgather: the rank's own block; the others: the
// whole input), and a reduce_scatter_block's Output is the result's block
// alone. Rank 0 of an exscan gets an Output of its own: gompi leaves that
// rank's receive buffer as it was. lent are the buffers to give back to
// a.Scratch.
func operands(c coll.Comm, a *coll.Args, op coll.Op) (in, out []byte, lent [][]byte) {
	in, out = a.Send, a.Recv
	if a.InPlace {
		src := a.Recv
		switch op {
		case coll.Allgather:
			blk := len(a.Recv) / c.Size()
			src = a.Recv[c.Rank()*blk : (c.Rank()+1)*blk]
		case coll.ReduceScatterBlock:
			out = a.Recv[:len(a.Recv)/c.Size()]
		}
		in = a.Scratch.Get(len(src))
		datatype.CopyCached(in, src)
		lent = append(lent, in)
	}
	if op == coll.Exscan && c.Rank() == 0 {
		own := a.Scratch.Get(len(out))
		datatype.CopyCached(own, out)
		out = own
		lent = append(lent, own)
	}
	return in, out, lent
}

// fits checks that every step's blocks lie within their buffers: Input
// and Output may be shorter than the n bytes the blocks cut (an
// allgather's input, a reduce_scatter_block's output), and a schedule
// that reaches past them does not fit the operation.
func (s *Schedule) fits(off, length []int, in, out int) error {
	n := 0
	if k := len(off); k > 0 {
		n = off[k-1] + length[k-1]
	}
	if in >= n && out >= n {
		return nil
	}
	lens := [numBuffers]int{Input: in, Output: out, Scratch: n}
	for ri, round := range s.Rounds {
		for si, st := range round {
			for _, b := range [2]Buffer{st.Src, st.Dst} {
				if b == None || st.First == st.End {
					continue
				}
				if end := off[st.End-1] + length[st.End-1]; end > lens[b] {
					return mpierr.Errorf(mpierr.ErrArg, "schedule for %s, rank %d of %d: round %d, step %d (%s): blocks [%d, %d) end at byte %d, past the %d bytes of %s: the schedule does not fit the operation's buffers",
						s.Op, s.Rank, s.Size, ri, si, st.Kind, st.First, st.End, end, lens[b], b)
				}
			}
		}
	}
	return nil
}

// small reports whether every send of the round is at most
// coll.SmallExchange bytes.
func small(round []Step, region func(Buffer, int, int) []byte) bool {
	for _, st := range round {
		if st.Kind == Send && len(region(st.Src, st.First, st.End)) > coll.SmallExchange {
			return false
		}
	}
	return true
}

// exchange runs a round's sends and receives at once: receives posted
// first, then the sends, then a wait for all.
func exchange(c coll.Comm, round []Step, region func(Buffer, int, int) []byte, tag int) error {
	var reqs []*pml.Request
	var want, from []int
	for _, st := range round {
		if st.Kind != Recv {
			continue
		}
		dst := region(st.Dst, st.First, st.End)
		q, err := c.Irecv(dst, st.Peer, tag)
		if err != nil {
			coll.WaitAll(c, reqs...)
			return err
		}
		reqs, want, from = append(reqs, q), append(want, len(dst)), append(from, st.Peer)
	}
	recvs := len(reqs)
	for _, st := range round {
		if st.Kind != Send {
			continue
		}
		q, err := c.Isend(region(st.Src, st.First, st.End), st.Peer, tag)
		if err != nil {
			coll.WaitAll(c, reqs...)
			return err
		}
		reqs = append(reqs, q)
	}
	// On a nonblocking run, wait without blocking first (the Waits below
	// then return at once).
	if aw, ok := c.(coll.Awaiter); ok {
		if err := aw.AwaitAll(reqs); err != nil {
			return err
		}
	}
	var first error
	for i, q := range reqs {
		st, err := q.Wait()
		if err == nil && i < recvs {
			err = coll.Exactly(c, st.Count, want[i], from[i])
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}
